# Orchard: one image, `orchard serve` by default, `orchard worker` as the alternative command.
# Configured only through ORCHARD_* environment variables (see README.md and docs/deployment.md).
#
#   docker build -t orchard .
#   docker run -p 8000:8000 -v orchard-data:/data orchard                   # API + embedded workers
#   docker run -e ORCHARD_QUEUE_URL=redis://... -v ...:/data orchard worker  # an RQ worker
#
# BASE_IMAGE must provide python3 (>= 3.11) with the venv module; both python:3.11-slim (python in
# /usr/local/bin) and a Debian bookworm base with python3 and python3-venv (/usr/bin/python3) work: the
# virtual environment is created in the build stage from the same base, so its interpreter path matches.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
# pip keeps no cache in the image; a build may mount a cache directory and name it (CI does):
#   --build-arg PIP_CACHE_MOUNT=/pip-cache -v /some/host/dir:/pip-cache
ARG PIP_CACHE_MOUNT=""
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/orchard \
 && if ! command -v strip >/dev/null && command -v apt-get >/dev/null; then \
      apt-get update -qq && apt-get install -y -qq --no-install-recommends binutils >/dev/null \
      && rm -rf /var/lib/apt/lists/*; fi
WORKDIR /src
# Dependencies first, from pyproject.toml alone, so that this layer is reused while only the code changes.
# Binary wheels (NumPy, SciPy, ... are manylinux wheels): no compiler in the image. uvicorn comes with the two
# parts of its [standard] extra that `orchard serve` uses (uvloop, httptools), not with websockets, watchfiles
# (--reload) and PyYAML (YAML logging configs). Left out: test suites, SQLAlchemy's test harness and the dialects
# whose drivers the image lacks (MySQL, SQL Server, Oracle), botocore's service models other than S3 and the
# credential services (STS, SSO), numpy.distutils (a build tool), C/Cython sources,
# headers and static libraries, debugging symbols of extension modules (not of the vendored *.libs, which strip
# would break); a vendored library shipped identically by two wheels (libgfortran, libquadmath in numpy.libs
# and scipy.libs) is kept once, the other name a symbolic link to it. The build fails if an import of what
# Orchard uses (API, training stack, RQ worker, SQLite and PostgreSQL dialects) breaks. Byte code is compiled
# with unchecked hashes at the end: a COPY may not keep file times, and time-checked .pyc files would then be
# stale and recompiled (unwritable for the unprivileged user) at every start.
COPY pyproject.toml ./
RUN python3 -c "import re, tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
deps = p['dependencies'] + p['optional-dependencies']['redis'] + p['optional-dependencies']['postgres'] \
+ p['optional-dependencies']['s3']; \
print('\n'.join(re.sub(r'^uvicorn\[standard\]', 'uvicorn', d) for d in deps) + '\nuvloop\nhttptools')" \
      > requirements.txt \
 && PIP_CACHE="$([ -n "$PIP_CACHE_MOUNT" ] && echo "--cache-dir=$PIP_CACHE_MOUNT" || echo --no-cache-dir)" \
 && /opt/orchard/bin/pip install $PIP_CACHE --prefer-binary -r requirements.txt \
 && SP="$(/opt/orchard/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && find "$SP" -depth -type d \( -name tests -o -name test \) -exec rm -rf {} + \
 && rm -rf "$SP/sqlalchemy/testing" "$SP/sqlalchemy/dialects/mssql" "$SP/sqlalchemy/dialects/mysql" \
      "$SP/sqlalchemy/dialects/oracle" "$SP/numpy/distutils" \
 && find "$SP/botocore/data" -mindepth 1 -maxdepth 1 -type d \
      -not \( -name s3 -o -name sts -o -name sso -o -name sso-oidc \) -exec rm -rf {} + \
 && rm -rf "$SP"/pyarrow/include "$SP"/pyarrow/src "$SP"/pyarrow/libarrow_flight.so* "$SP"/pyarrow/_flight*.so \
      "$SP"/pyarrow/libarrow_s3.so* "$SP"/pyarrow/_s3fs*.so \
 && find "$SP" -type f \( -name "*.pyx" -o -name "*.pxd" -o -name "*.pyi" -o -name "*.c" -o -name "*.h" \
      -o -name "*.a" \) -delete \
 && cd "$SP" && for f in *.libs/*; do b="${f#*/}"; for g in *.libs/"$b"; do \
      if [ "$g" != "$f" ] && [ ! -L "$f" ] && [ ! -L "$g" ] && cmp -s "$f" "$g"; then ln -sf "../${f%%/*}/$b" "$g"; fi; \
    done; done && cd /src \
 && if command -v strip >/dev/null; then \
      find "$SP" -name "*.so*" -type f -not -path "*.libs/*" -exec strip --strip-unneeded {} +; fi \
 && /opt/orchard/bin/python -c "import numpy, scipy.linalg, scipy.optimize, scipy.special, scipy.stats, uvloop, \
httptools, orjson, pydantic_core, sqlalchemy.orm, psycopg, boto3, pyarrow.csv, pyarrow.parquet, pyarrow.compute; \
numpy.linalg.inv(numpy.eye(3)); \
boto3.client('s3', region_name='us-east-1'); boto3.client('sts', region_name='us-east-1'); \
scipy.linalg.cho_factor(numpy.eye(3)); assert psycopg.pq.__impl__ == 'binary', psycopg.pq.__impl__"
COPY README.md ./
COPY core ./core
COPY service ./service
RUN /opt/orchard/bin/pip install "$([ -n "$PIP_CACHE_MOUNT" ] && echo "--cache-dir=$PIP_CACHE_MOUNT" || echo --no-cache-dir)" \
      --no-deps . \
 && /opt/orchard/bin/pip uninstall -q -y pip setuptools \
 && /opt/orchard/bin/python -m compileall -q -f -j 0 --invalidation-mode unchecked-hash /opt/orchard/lib >/dev/null \
 && cd / && /opt/orchard/bin/python -c "import core, service.app, service.cli, service.queue.worker_preload, \
service.queue.rq_backend, service.storage.s3, sqlalchemy.dialects.sqlite, sqlalchemy.dialects.postgresql.psycopg, rq, redis, boto3; \
from service.storage.schema import head_revision; head_revision()" \
 && cd /src

FROM ${BASE_IMAGE}
# python:*-slim ships its standard library without byte code, which the unprivileged user cannot write: every
# start would compile the modules it imports again. Compile them once here (missing files only: a Debian base
# has them already; left out: site-packages, test suites, GUI and 2to3 modules, never imported by Orchard).
# A fixed unprivileged user (written directly: minimal bases may lack useradd). A container is reached by names
# unknown here (service names, pod addresses of the kubelet's probes, load balancers): any Host is served
# (ORCHARD_ALLOWED_HOSTS=*; set your names to narrow it). DNS rebinding targets a server on the browser's own
# machine; the cross-site refusals hold whatever the Host (docs/decisions/browser-safety.md).
RUN python3 -m compileall -q -j 0 --invalidation-mode unchecked-hash \
      -x '/(site-packages|dist-packages|test|tests|idlelib|tkinter|turtledemo|lib2to3|ensurepip)/' \
      "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')" >/dev/null \
 && echo "orchard:x:10001:10001:Orchard:/data:/usr/sbin/nologin" >> /etc/passwd \
 && echo "orchard:x:10001:" >> /etc/group \
 && mkdir -p /data && chown 10001:10001 /data
COPY --from=build /opt/orchard /opt/orchard
ENV PATH=/opt/orchard/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    ORCHARD_DATA_DIR=/data \
    ORCHARD_HOST=0.0.0.0 \
    ORCHARD_ALLOWED_HOSTS=* \
    ORCHARD_PORT=8000
VOLUME ["/data"]
WORKDIR /data
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:%s/health/live' % os.environ.get('ORCHARD_PORT', '8000'), timeout=4).status != 200)"]
ENTRYPOINT ["orchard"]
CMD ["serve"]
