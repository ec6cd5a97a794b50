"""Speed, memory and accuracy of the engine beside scikit-learn, LightGBM and XGBoost.

Run ``python -m benchmarks.run --help`` (or ``make bench``); ``benchmarks/README.md`` describes
what is measured and how. Nothing here is imported by the engine or the service.
"""
