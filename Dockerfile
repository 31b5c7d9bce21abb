# The one image of docker-compose.yaml: every Airflow component and every Spark daemon runs from it, so the
# driver, the executors and the Spark Connect server share one Python, one Java and one pyspark.
#
# Python 3.11 (pyproject.toml: requires-python >=3.11) on Debian bookworm, which ships OpenJDK 17 (Spark 4
# needs Java 17; newer Debian releases no longer package it). csparql is installed as its users install it: a
# wheel built from this repository, with the pins of constraints.txt. Nothing is read from the checkout at run
# time, and nothing is put on PYTHONPATH: Airflow finds the provider and the plugin through the wheel's entry
# points.
FROM python:3.11-slim-bookworm

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    AIRFLOW_HOME=/opt/airflow

# /usr/share/man/man1 must exist for the JRE's post-install script on slim images. curl serves the health checks.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless curl \
 && rm -rf /var/lib/apt/lists/*

# Everything runs as airflow (uid 50000, group root). The warehouse folder belongs to it: a named volume mounted
# there starts with that owner.
RUN useradd --uid 50000 --gid 0 --home-dir /opt/airflow --create-home --shell /bin/bash airflow \
 && mkdir -p /opt/airflow/logs /opt/csparql/warehouse/landing \
 && chown -R airflow:0 /opt/airflow /opt/csparql

# The metadata database drivers, pinned here as constraints.txt does not list them: psycopg2 for Airflow's
# sessions, asyncpg for its async ones (AIRFLOW__DATABASE__SQL_ALCHEMY_CONN[_ASYNC] in docker-compose.yaml).
ARG DATABASE_DRIVERS="psycopg2-binary==2.9.13 asyncpg==0.32.0"

WORKDIR /opt/csparql/src
COPY pyproject.toml README.md constraints.txt ./
# Dependencies first, in a layer that changes only with pyproject.toml or constraints.txt: install the project
# with an empty package, then drop it.
RUN mkdir -p plugins/csparql \
 && touch plugins/csparql/__init__.py \
 && pip install -c constraints.txt . ${DATABASE_DRIVERS} \
 && pip uninstall -y csparql \
 && rm -rf plugins build
COPY plugins/csparql/ plugins/csparql/
RUN pip wheel --no-deps --wheel-dir /opt/csparql/dist . \
 && pip install -c constraints.txt /opt/csparql/dist/csparql-*.whl \
 && cd / && rm -rf /opt/csparql/src

# Airflow's home with the DAG files of the deployment (docker-compose.yaml mounts the working copy over it).
WORKDIR /opt/airflow
COPY --chown=airflow:0 dags/ /opt/airflow/dags/

USER airflow
