"""RDF terms as Spark columns: the stored struct (``csparql.storage.terms``), constants and constructors."""

from __future__ import annotations

import functools

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ByteType, StringType, StructField, StructType
from rdflib.term import Identifier

from csparql.spark.schema import spark_type
from csparql.storage.schema import BLANK, IRI, LITERAL, TERM_TYPE
from csparql.storage.terms import term_row

TERM_STRUCT = spark_type(TERM_TYPE)
"""The stored term struct as a Spark type."""

NULLABLE_TERM_STRUCT = StructType([StructField(f.name, f.dataType, True) for f in TERM_STRUCT.fields])
"""The term struct with every field nullable: the type a column of terms is collected as, since an unbound
term is a null struct whose fields read null too."""

__all__ = ["TERM_STRUCT", "IRI", "BLANK", "LITERAL", "make_term", "constant", "null_term"]


def make_term(kind, value: Column, datatype: Column | str | None = None, language: Column | str | None = None) -> Column:
    """A term struct from its parts; null when ``value`` is null (an error or unbound)."""
    kind_col = kind if isinstance(kind, Column) else _byte(kind)
    datatype_col = datatype if isinstance(datatype, Column) else _string(datatype)
    language_col = language if isinstance(language, Column) else _string(language)
    struct = F.struct(
        kind_col.cast(ByteType()).alias("kind"),
        value.alias("value"),
        datatype_col.cast(StringType()).alias("datatype"),
        language_col.cast(StringType()).alias("language"),
    )
    return F.when(value.isNotNull(), struct)


@functools.lru_cache(maxsize=8192)
def constant(term: Identifier) -> Column:
    """A column holding the given ground term (the same Column object for the same term: building a Column
    costs round trips to the JVM, and a plan uses its constants again at every window)."""
    kind, value, datatype, language = term_row(term)
    return F.struct(
        _byte(kind).alias("kind"),
        _string(value).alias("value"),
        _string(datatype).alias("datatype"),
        _string(language).alias("language"),
    )


@functools.lru_cache(maxsize=1024)
def _byte(value: int | None) -> Column:
    return F.lit(value).cast(ByteType())


@functools.lru_cache(maxsize=8192)
def _string(value: str | None) -> Column:
    return F.lit(value).cast(StringType())


def null_term() -> Column:
    """An unbound term (a typed null)."""
    return F.lit(None).cast(TERM_STRUCT)
