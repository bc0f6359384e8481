# docparse: one image, three roles (k8s/ sets the command and DOCPARSE_ROLE per Deployment)
#   python -m parser_svc          DOCPARSE_ROLE=all | api | worker   gRPC :50051
#   python -m gateway             gRPC :50050 (+ HTTP :8080)
#
#   docker build -t docparse:dev .
#   docker run --rm -e DOCPARSE_REDIS_URL=redis://host:6379/0 -p 50051:50051 docparse:dev
#
# Both stages use the same base image, so the virtualenv built in the first one runs unchanged
# in the second. Pin the digest in your registry mirror if you need bit-for-bit rebuilds.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS build

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1

# A compiler only for a dependency without a wheel for the target platform (on linux/amd64
# every dependency has one today). It stays in this stage. Debian packages are not pinned to a
# version: the archive drops old versions, so a pin breaks the build at the next point release.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src

# Dependencies first: this layer is reused until pyproject.toml changes.
# rapidocr-onnxruntime asks for opencv-python, which links libGL and X11 (absent from a slim
# image, and nothing a server needs); its twin opencv-python-headless provides the same `cv2`
# module without them, so it is built here at the same version and swapped in below.
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['server']))" > requirements.txt \
 && pip wheel --wheel-dir /wheels -r requirements.txt \
 && opencv_version="$(find /wheels -name 'opencv_python-*.whl' | sed -E 's|.*/opencv_python-([^-]+)-.*|\1|')" \
 && test -n "$opencv_version" \
 && pip wheel --no-deps --wheel-dir /wheels "opencv-python-headless==${opencv_version}"

COPY docparse ./docparse
COPY docparse_server ./docparse_server
COPY parser_svc ./parser_svc
COPY gateway ./gateway

# A virtualenv without pip, filled from the wheels only (--no-index). pip byte-compiles what it
# installs, so the read-only root filesystem never needs a __pycache__ at run time. Versions
# come from the wheels built above (pyproject.toml pins them), hence no pin on these lines.
# hadolint ignore=DL3013
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv --without-pip /opt/venv \
 && pip --python /opt/venv/bin/python install --no-index --find-links /wheels "docparse[server]" \
 && pip --python /opt/venv/bin/python uninstall -y opencv-python \
 && pip --python /opt/venv/bin/python install --no-index --find-links /wheels --no-deps opencv-python-headless \
 && /opt/venv/bin/python -m parser_svc.parsers.native.build \
 && /opt/venv/bin/python -c "import cv2, onnxruntime, rapidocr_onnxruntime, tesserocr, pymupdf, parser_svc.server, gateway.server" \
 && /opt/venv/bin/python -c "from parser_svc.parsers import pdf_pass; assert pdf_pass.native()" \
 && ls /opt/venv/lib/python3.11/site-packages/rapidocr_onnxruntime/models/*.onnx

# ---------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

ARG DOCPARSE_UID=10001

# antiword: DOC (Word 97-2003) parsing. tesseract-ocr + language packs: OCR (the models that
# tesserocr reads in-process; the same list as OCR_LANG_PACKS in the Makefile). tini: PID 1
# that forwards SIGTERM to the service (and
# only to it, so parse children are not killed before the drain) and reaps orphaned children.
# No compiler, no pip-built artefacts beyond the virtualenv. (Not version-pinned: see above.)
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends antiword tini \
      tesseract-ocr tesseract-ocr-eng tesseract-ocr-deu tesseract-ocr-fra tesseract-ocr-spa \
      tesseract-ocr-ita tesseract-ocr-por tesseract-ocr-nld tesseract-ocr-pol tesseract-ocr-rus \
      tesseract-ocr-ukr tesseract-ocr-chi-sim tesseract-ocr-chi-tra tesseract-ocr-jpn \
      tesseract-ocr-kor tesseract-ocr-ara \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid "${DOCPARSE_UID}" docparse \
 && useradd --system --uid "${DOCPARSE_UID}" --gid docparse --home-dir /home/docparse \
      --create-home --shell /usr/sbin/nologin docparse \
 && mkdir -p /data/blobs \
 && chown -R "${DOCPARSE_UID}:${DOCPARSE_UID}" /data

COPY --from=build /opt/venv /opt/venv

# In containers the servers listen on every interface; the blob store is a mounted volume
# (k8s: a ReadWriteMany PVC at /data/blobs). Temporary files go to /tmp (k8s: an emptyDir,
# since the root filesystem is read-only).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TMPDIR=/tmp \
    XDG_CACHE_HOME=/tmp/.cache \
    DOCPARSE_LISTEN=0.0.0.0:50051 \
    DOCPARSE_BLOB_DIR=/data/blobs \
    DOCPARSE_GATEWAY_LISTEN=0.0.0.0:50050 \
    DOCPARSE_GATEWAY_HTTP_LISTEN=0.0.0.0:8080

WORKDIR /home/docparse
USER ${DOCPARSE_UID}:${DOCPARSE_UID}

EXPOSE 50050 50051 8080

# Kubernetes sets `args` (the role), never `command`, so tini stays PID 1.
ENTRYPOINT ["tini", "--"]
CMD ["python", "-m", "parser_svc"]
