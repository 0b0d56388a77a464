"""Service configuration: every setting is an ``ORCHARD_*`` environment variable."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from .services.resources import default_max_train_bytes, default_worker_memory_bytes


def _default_workers() -> int:
    return max(1, os.cpu_count() or 1)


class Settings(BaseSettings):
    """Orchard settings (env prefix ``ORCHARD_``); the README's configuration table lists them."""

    model_config = SettingsConfigDict(env_prefix="ORCHARD_", extra="ignore")

    data_dir: Path = Field(Path("./orchard-data"), description="Directory of artifacts (datasets, models) and the default SQLite database.")
    database_url: str | None = Field(None, description="SQLAlchemy URL of the metadata store; default sqlite:///<data_dir>/orchard.db. PostgreSQL: postgresql+psycopg://user@host/db.")
    queue_url: str | None = Field(None, description="redis://... to run jobs on RQ workers (`orchard worker`); unset: embedded process pool.")
    queue_name: str = Field("orchard", description="Name of the RQ queue (API replicas and workers must agree).")
    artifacts_url: str | None = Field(None, description="s3://bucket/prefix keeps datasets and models in an S3-compatible bucket (endpoint, credentials and region from the usual AWS_* variables); unset: files under data_dir.")
    secret_key: str | None = Field(None, description="HMAC-SHA256 key that signs artifacts; unset: a random key is generated once and kept in <data_dir>/secret.key.")
    workers: int = Field(default_factory=_default_workers, ge=0, description="Training worker processes of the embedded queue (default: one per core).")
    host: str = Field("127.0.0.1", description="Address `orchard serve` binds.")
    port: int = Field(8000, ge=0, le=65535, description="Port `orchard serve` listens on.")
    max_body_bytes: int = Field(512 * 1024 * 1024, ge=1024, description="Largest request body accepted; larger ones get 413.")
    model_cache_bytes: int = Field(512 * 1024 * 1024, ge=0, description="Memory budget of the in-memory cache of loaded models (evicted least recently used).")
    max_predict_rows: int = Field(100_000, ge=1, description="Most rows one predict request may carry.")
    classifier_max_numeric_classes: int = Field(50, ge=2, description="A classifier's numeric target with more distinct values than this (and than 20% of the rows) is refused as continuous (422).")
    log_level: str = Field("info", description="Log level (debug, info, warning, error).")
    log_format: Literal["json", "text"] = Field("json", description="Log lines as one JSON object each (json) or plain text (text).")
    access_log: bool = Field(True, description="Log every request (method, path, route, status, duration, request id).")
    metrics: bool = Field(True, description="Serve Prometheus metrics at /metrics and count requests; false turns both off.")
    job_poll_interval: float = Field(0.2, gt=0, description="Seconds between a running job's checks for cancellation.")
    job_sweep_interval: float = Field(10.0, gt=0, description="Seconds between each API replica's reconciliations: queued jobs the queue no longer holds are enqueued again, running jobs whose lease expired are retried or failed.")
    job_lease_timeout: float = Field(30.0, gt=0, description="Seconds a running job's lease lasts; the process running it renews it every third of this. A job whose lease expired lost its worker: it is detected within this plus ORCHARD_JOB_SWEEP_INTERVAL.")
    job_max_attempts: int = Field(2, ge=1, description="Attempts of a job whose worker was lost (killed, machine gone, lease expired) before it is failed; a job that fails by itself (bad data, timeout) is never retried.")
    job_timeout: float = Field(86400.0, gt=0, description="Seconds a job may run before it is stopped and failed (RQ's job_timeout; the reconciler enforces it in both modes).")
    redis_socket_timeout: float = Field(10.0, gt=0, description="RQ mode: seconds a Redis command may take before it fails (API side; workers wait for Redis with backoff).")
    redis_connect_timeout: float = Field(5.0, gt=0, description="RQ mode: seconds to connect to Redis.")
    max_train_bytes: int = Field(default_factory=default_max_train_bytes, ge=0, description="Largest estimated peak memory of one training fit; POST /v1/train answers 422 above it (0: no check). Default: half the machine's memory (RAM or cgroup limit).")
    worker_memory_bytes: int = Field(default_factory=default_worker_memory_bytes, ge=0, description="Address-space cap (RLIMIT_AS) of every training worker process (embedded pool and RQ work-horses); a fit growing past it fails its job (0: no cap). Default: three quarters of the machine's memory, at least 1 GiB.")
    janitor_grace_s: float = Field(3600.0, ge=0, description="Age (seconds without change) after which the janitor collects orphan artifacts (no metadata row) and temporary directories of ended processes.")
    hist_workers: int = Field(1, ge=1, le=2, description="Processes of one histogram gradient-boosting fit whose request leaves n_jobs null (the service passes it as n_jobs): with 2, a fit of at least 8,192 rows forks a worker process for half of its rows (~1.2-1.3x faster on 2 idle cores, the same model; docs/decisions/gradient-boosting.md). 1 keeps each fit on its worker's core.")
    training_metrics_max_rows: int = Field(10_000, ge=1, description="Lazy learners (kNN, locally weighted regression, Gaussian processes, kernel ridge, kernel perceptron), whose prediction compares a row with the training rows, get metrics.training, and the train scores of model selection (learning curves), on a seeded random sample of at most this many training rows (the model's or the job's notes say so); other algorithms are scored on every training row (docs/decisions/training-metrics-sample.md).")
    janitor_interval_s: float = Field(900.0, gt=0, description="Seconds between the janitor's passes in each API process (it also runs at start).")

    allowed_hosts: str = Field("localhost,127.0.0.1,[::1]", description="Comma-separated host names a request's Host header may name (any port; `*.example.com` a domain and its subdomains; `*` any host); others get 400. Refuses DNS rebinding. The container image sets `*` (docs/decisions/browser-safety.md).")
    cors_origins: str = Field("", description="Comma-separated browser origins (scheme://host[:port], or `*`) allowed to call the API cross-origin (CORS); empty: CORS off, and cross-site state-changing requests are refused with 403.")
    header_timeout_s: float = Field(10.0, gt=0, description="Seconds a client has to send a request's headers (from the connection or the previous answer); then the connection is closed (slow clients).")
    body_timeout_s: float = Field(60.0, gt=0, description="Seconds a client has to send a request's body (plus one second per 256 KiB received, for large uploads); then 408 and the connection is closed.")
    send_timeout_s: float = Field(60.0, gt=0, description="Seconds a client may take none of an answer waiting to be sent to it (the server's send buffer full); then the connection is aborted (slow readers).")
    max_columns: int = Field(10_000, ge=1, description="Most columns an uploaded dataset (CSV, Parquet or JSON) or an inline table of train and evaluate may have; wider ones get 422 before the table is parsed.")
    auth: Literal["auto", "on", "off"] = Field("auto", description="API keys: auto (required once any key exists; none: open, loopback only), on (always required), off (never: anyone reaching the port may do anything). `orchard serve` on a non-loopback address refuses to start with auto/on and no key, unless ORCHARD_ADMIN_KEY is set.")
    admin_key: SecretStr | None = Field(None, description="An admin API key (at least 32 characters) created at start if absent and accepted from then on: the first key of a container or a cluster. Keep it in a secret store.")
    metrics_public: bool = Field(False, description="Serve /metrics without a key (a scraper inside a trusted network); false: it needs a key with the read scope.")
    rate_limit_per_s: float = Field(0.0, ge=0, description="Requests per second each API key may make (token bucket, shared through Redis when ORCHARD_QUEUE_URL is set); 0: no limit. Over it: 429 with Retry-After.")
    rate_limit_burst: int = Field(0, ge=0, description="Requests a key may make at once above its rate (the bucket's size); 0: twice ORCHARD_RATE_LIMIT_PER_S, at least 1.")
    max_project_jobs: int = Field(100, ge=0, description="Most queued plus running jobs (train, model selection, importance) of one project; more are refused with 429 until some finish. 0: no cap.")

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'orchard.db').resolve()}"

    def resolved_secret(self) -> bytes:
        if self.secret_key:
            return self.secret_key.encode()
        from .storage.files import load_or_create_secret

        return load_or_create_secret(self.data_dir)
