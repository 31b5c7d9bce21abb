"""Byte ranges of an input file, the executors' side of the parallel parse: a file is cut into ranges, a first
pass counts each range's newlines (so that line numbers are exact), a second parses each range's lines into
Arrow batches (``csparql.ingest.parsers.lines``) and writes its rejects (``csparql.ingest.parsers.rejects``).

This module runs inside the executors' Python workers (``mapInArrow`` over one row per byte range: its id, and,
where executors cannot read the driver's files, its bytes), so it imports neither Spark nor Delta.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from csparql.ingest.parsers.lines import FutureLimit, LineParser
from csparql.ingest.parsers.rejects import write_rejects


@dataclass(frozen=True)
class ByteRange:
    """A slice [start, end) of one input file. Its lines are those that START inside it; the last one is
    read past ``end`` to its newline. ``newlines_before`` is how many newlines the file has before ``start``
    (from the first pass), so line numbers are exact."""

    index: int  # position among all ranges of the ingest (the order of the rejects)
    file_index: int
    path: str
    start: int
    end: int
    newlines_before: int = 0


def count_newlines(path: str, start: int, end: int) -> int:
    """How many newline bytes the file has in [start, end)."""
    count = 0
    with open(path, "rb") as handle:
        handle.seek(start)
        left = end - start
        while left > 0:
            chunk = handle.read(min(left, 8 << 20))
            if not chunk:
                break
            count += chunk.count(b"\n")
            left -= len(chunk)
    return count


def range_bytes(byte_range: ByteRange) -> bytes:
    """What the range's lines are read from, to be sent where its file cannot be read (``read_lines``): one
    byte saying whether the range starts inside a line (``1``) or not (``0``), then its bytes, then the rest of
    its last line."""
    skip_partial, data = _read_range(byte_range)
    return (b"1" if skip_partial else b"0") + data


def _read_range(byte_range: ByteRange) -> tuple[bool, bytes]:
    start, end = byte_range.start, byte_range.end
    with open(byte_range.path, "rb") as handle:
        skip_partial = False
        if start > 0:
            handle.seek(start - 1)
            skip_partial = handle.read(1) != b"\n"
        data = handle.read(end - start)
        if data and not data.endswith(b"\n"):
            tail = []
            while True:
                chunk = handle.read(1 << 16)
                if not chunk:
                    break
                cut = chunk.find(b"\n")
                if cut >= 0:
                    tail.append(chunk[: cut + 1])
                    break
                tail.append(chunk)
            data += b"".join(tail)
    return skip_partial, data


def read_lines(byte_range: ByteRange, sent: bytes | None = None) -> tuple[int, list[bytes | str]]:
    """The line number of the range's first line and its lines (without newlines), decoded when the whole
    slice is UTF-8 (else bytes, decoded line by line by the caller); read from its file, or from ``sent``
    (its ``range_bytes``)."""
    start, end = byte_range.start, byte_range.end
    skip_partial, data = _read_range(byte_range) if sent is None else (sent[:1] == b"1", sent[1:])
    first_line = byte_range.newlines_before + 1
    if skip_partial:  # the line holding `start` began in the previous range, which reads it
        cut = data.find(b"\n")
        if cut < 0 or cut >= end - start - 1:  # the next line starts at or after `end`: not ours
            return first_line, []
        data = data[cut + 1:]
        first_line += 1
    if not data:
        return first_line, []
    if data.endswith(b"\n"):
        data = data[:-1]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return first_line, data.split(b"\n")
    if "\r" in text:  # CRLF line ends
        text = text.replace("\r\n", "\n")
        if text.endswith("\r"):
            text = text[:-1]
    return first_line, text.split("\n")


BATCH_LINES = 65_536


def parse_range(
    byte_range: ByteRange,
    scope: str,
    arrival_base: int,
    timestamps: bool,
    default_micros: int | None,
    rejects_folder: str | None,
    future: FutureLimit | None = None,
    sent: bytes | None = None,
) -> Iterator[pa.RecordBatch]:
    """Parse the lines of one byte range (from its file, or from ``sent``, its ``range_bytes``) into record
    batches; write its rejects (file index, line, reason, text) to ``<rejects_folder>/<range index>.tsv``. A
    line timestamped after ``future`` is rejected."""
    first_line, lines = read_lines(byte_range, sent)
    parser = LineParser(scope, timestamps, default_micros, future)
    rejects: list[tuple[int, str, str]] = []  # lines that are not even UTF-8
    if lines and first_line == 1:
        first = lines[0]
        if isinstance(first, str) and first.startswith("\ufeff"):
            lines[0] = first[1:]
        elif isinstance(first, bytes) and first.startswith(b"\xef\xbb\xbf"):
            lines[0] = first[3:]
    if not lines or isinstance(lines[0], str):
        for begin in range(0, len(lines), BATCH_LINES):
            parser.add_lines(first_line + begin, lines[begin:begin + BATCH_LINES])
            if len(parser):
                yield parser.batch(arrival_base)
    else:  # the slice is not all UTF-8: decode line by line, rejecting the lines that are not
        number = first_line
        for raw in lines:
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                rejects.append((number, f"not UTF-8 text (byte {error.start + 1} of the line)",
                                raw.decode("utf-8", "backslashreplace")))
            else:
                parser.add(number, line[:-1] if line.endswith("\r") else line)
            number += 1
            if len(parser) >= BATCH_LINES:
                yield parser.batch(arrival_base)
        if len(parser):
            yield parser.batch(arrival_base)
    rejects = sorted(rejects + parser.rejects)
    if rejects_folder is not None and rejects:
        write_rejects(os.path.join(rejects_folder, f"{byte_range.index:08d}.tsv"), byte_range.file_index, rejects)


# ---------------------------------------------------------------------------------------------------------
# The functions Spark runs (``mapInArrow`` over one row per byte range)
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RangeJob:
    """What an executor needs to parse one byte range."""

    byte_range: ByteRange
    scope: str  # blank node label prefix of the range's file
    arrival_base: int  # arrival of line n is arrival_base + n
    timestamps: bool  # a stream (True) or a static graph (False)
    default_micros: int | None  # --timestamp, for lines without a fourth term
    future: FutureLimit | None = None  # the latest timestamp accepted (streams)


def newline_counter(ranges: list[ByteRange]):
    """The first pass: for each range id, how many newlines its bytes hold (``id long, newlines long``)."""

    def count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            ids = batch.column(0).to_pylist()
            counts = [count_newlines(ranges[i].path, ranges[i].start, ranges[i].end) for i in ids]
            yield pa.RecordBatch.from_arrays([pa.array(ids, pa.int64()), pa.array(counts, pa.int64())],
                                             names=["id", "newlines"])

    return count


def range_parser(jobs: list[RangeJob], rejects_folder: str):
    """The second pass: for each range id, its parsed rows (``PARSED_STREAM`` or ``PARSED_STATIC``); its
    rejects go to ``rejects_folder``."""

    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            ids = batch.column(0).to_pylist()
            sent = batch.column(1).to_pylist() if batch.num_columns > 1 else [None] * len(ids)
            for i, data in zip(ids, sent):
                job = jobs[i]
                yield from parse_range(job.byte_range, job.scope, job.arrival_base, job.timestamps,
                                       job.default_micros, rejects_folder, job.future, data)

    return parse
