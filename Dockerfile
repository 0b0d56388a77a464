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
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python3 -m venv /opt/orchard
WORKDIR /src
# Dependencies first, from pyproject.toml alone, so that this layer is reused while only the code changes.
# Binary wheels (NumPy, SciPy, ... are manylinux wheels): no compiler in the image. The test suites of the
# scientific packages are left out; byte code stays compiled (faster start-up).
COPY pyproject.toml ./
RUN python3 -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + p['optional-dependencies']['redis'] + p['optional-dependencies']['postgres']))" \
      > requirements.txt \
 && /opt/orchard/bin/pip install --prefer-binary -r requirements.txt \
 && SP="$(/opt/orchard/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && find "$SP/numpy" "$SP/scipy" -depth -type d -name tests -exec rm -rf {} +
COPY README.md ./
COPY core ./core
COPY service ./service
RUN /opt/orchard/bin/pip install --no-deps . \
 && /opt/orchard/bin/pip uninstall -q -y pip setuptools

FROM ${BASE_IMAGE}
# A fixed unprivileged user (written directly: minimal bases may lack useradd).
RUN echo "orchard:x:10001:10001:Orchard:/data:/usr/sbin/nologin" >> /etc/passwd \
 && echo "orchard:x:10001:" >> /etc/group \
 && mkdir -p /data && chown 10001:10001 /data
COPY --from=build /opt/orchard /opt/orchard
ENV PATH=/opt/orchard/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    ORCHARD_DATA_DIR=/data \
    ORCHARD_HOST=0.0.0.0 \
    ORCHARD_PORT=8000
VOLUME ["/data"]
WORKDIR /data
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:%s/health/live' % os.environ.get('ORCHARD_PORT', '8000'), timeout=4).status != 200)"]
ENTRYPOINT ["orchard"]
CMD ["serve"]
