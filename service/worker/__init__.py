"""The training worker: claims queued jobs, fits each in its own process, records the outcome.

Import from the modules themselves: :mod:`~service.worker.claim_loop` (one worker: the claim
loop, ``run_worker``), :mod:`~service.worker.job_watch` (the watcher of one claimed job),
:mod:`~service.worker.fit_process` (the process that trains it),
:mod:`~service.worker.messages` (what the two say to each other), :mod:`~service.worker.queue`
and :mod:`~service.worker.recovery` (the job row's SQL). See ``docs/api.md`` ("Jobs and
workers") for how jobs move, leases and recovery.
"""
