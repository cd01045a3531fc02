"""The lab agent: the Celery worker process on a GPU host (`celery -A worker.agent.app worker`).

It holds a broker URL and a host key, never database credentials: everything it learns or
stores goes through the site's HTTP API (`/api/v1/lab/agent/…`, protocol.py).
"""
