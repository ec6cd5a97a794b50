"""The Open Inference Protocol (KServe v2) surface under ``/v2``.

``router`` (HTTP) → ``serving`` (which model a name serves) → ``service.infer``, whose steps are
modules of their own: ``wire`` (body bytes: compression, JSON header, binary data, the
response), ``requests`` (the header's outputs and input tensors), ``tensors`` (one tensor's
data), ``features`` (tensors onto the model's features, encoded by ``service.models.encoding``,
the encoder ``/v1`` predict uses too), ``outputs`` (predictions, probabilities, contributions);
``metadata`` writes the server's and a model's metadata.
"""
