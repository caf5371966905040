"""The client side of the results service: everything that talks to an ``accelbench server`` over HTTP.

    http.py     ``ServerClient``: the one HTTP client (httpx) of the server's API; statuses → exceptions
    push.py     ``accelbench push`` (folders → batches) and ``PushSink`` (``accelbench run --push``)
    agent.py    ``accelbench agent``: a runner that registers and long-polls for its target's jobs
    job.py      one claimed job: the pipeline run with ``JobSink`` (steps and results pushed), heartbeats

It imports neither FastAPI nor SQLAlchemy nor ``accelbench.service``: a host that measures needs only httpx.
The server's answers are read as the models the server returns (``accelbench/answers.py``, below both).
"""
