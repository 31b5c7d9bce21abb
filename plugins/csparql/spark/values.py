"""SPARQL values as Spark columns, with the operator semantics of SPARQL 1.1 §17.

A ``Value`` is one SPARQL value per row; a null column means an error or an unbound variable (§17.2). SQL's
three-valued ``AND``/``OR``/``NOT`` over such booleans is exactly SPARQL's logical-and/or/not with errors, so
filters keep the rows whose effective boolean value is true.

Values keep the representation they were computed in — an RDF term struct, a number, a boolean, a string
with its language, a date-time — and convert only when an operator needs another one, so ``?x + 1 > 5``
never formats a number just to parse it again. Numbers follow SPARQL's type promotion: integer and decimal
arithmetic is exact (``decimal(38,18)``), float and double arithmetic uses doubles.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, DoubleType, StringType

from csparql.spark.terms import make_term
from csparql.storage import vocabulary
from csparql.storage.terms import BLANK, IRI, LITERAL
from csparql.storage.vocabulary import (
    RDF_LANGSTRING,
    XSD_BOOLEAN,
    XSD_DATETIME,
    XSD_DECIMAL,
    XSD_DOUBLE,
    XSD_FLOAT,
    XSD_INTEGER,
    XSD_STRING,
)

DECIMAL = DecimalType(38, 18)
INTEGER_TYPES = sorted(vocabulary.INTEGER_TYPES)
RANK_DATATYPE = {1: XSD_INTEGER, 2: XSD_DECIMAL, 3: XSD_FLOAT, 4: XSD_DOUBLE}

# Value categories: what operators a value takes part in.
NUM, STR, LANG, BOOL, DATETIME, LIT, NODE = "num", "str", "lang", "bool", "datetime", "lit", "node"


def _lit(value) -> Column:
    return F.lit(value)


def _memo(method):
    """Cache a Value's view: building a Spark column costs a round trip to the JVM per function, and a view
    asked for twice would otherwise be built (and sent) twice."""
    attribute = "_memo_" + method.__name__

    @functools.wraps(method)
    def cached(self):
        found = self.__dict__.get(attribute)
        if found is None:
            found = method(self)
            self.__dict__[attribute] = found
        return found

    return cached


@dataclass(frozen=True)
class Numeric:
    """A number: its rank (1 integer, 2 decimal, 3 float, 4 double; null when not a number), its exact value
    (meaningful for ranks 1–2) and its double value."""

    rank: Column
    dec: Column
    dbl: Column


class Value:
    """One SPARQL value per row. Subclasses keep a native representation; every view is a Spark column."""

    category_hint: str | None = None  # the category when known at compile time

    @_memo
    def term(self) -> Column:
        raise NotImplementedError

    @_memo
    def category(self) -> Column:
        raise NotImplementedError

    @_memo
    def numeric(self) -> Numeric:
        raise NotImplementedError

    @_memo
    def boolean(self) -> Column:
        """The value as xsd:boolean (null when it is not a valid boolean literal)."""
        raise NotImplementedError

    @_memo
    def string(self) -> tuple[Column, Column]:
        """(lexical form, language) of a string literal (simple, xsd:string or language-tagged); nulls otherwise."""
        raise NotImplementedError

    @_memo
    def datetime(self) -> Column:
        """The value as a timestamp, for an xsd:dateTime literal; null otherwise."""
        raise NotImplementedError

    @_memo
    def ebv(self) -> Column:
        """The effective boolean value, §17.2.2 (null for an error)."""
        raise NotImplementedError

    def is_literal(self) -> Column:
        return self.term().getField("kind") == LITERAL

    def is_category(self, category: str) -> Column:
        """Whether the value belongs to a category (NUM, STR, LANG, BOOL, DATETIME, LIT, NODE); null when
        the value is an error."""
        if self.category_hint is not None:
            return F.when(self.term().isNotNull(), F.lit(self.category_hint == category))
        return self.category() == category


class TermValue(Value):
    """A value held as an RDF term struct, typically a variable's binding or a constant."""

    def __init__(self, column: Column, category_hint: str | None = None):
        self.column = column
        self.category_hint = category_hint

    @_memo
    def term(self) -> Column:
        return self.column

    @property
    @_memo
    def kind(self) -> Column:
        return self.column.getField("kind")

    @property
    @_memo
    def lexical(self) -> Column:
        return self.column.getField("value")

    @property
    @_memo
    def datatype(self) -> Column:
        return self.column.getField("datatype")

    @property
    @_memo
    def language(self) -> Column:
        return self.column.getField("language")

    @_memo
    def _rank(self) -> Column:
        literal = self.kind == LITERAL
        dt = self.datatype
        lexical = self.lexical
        return (
            F.when(literal & dt.isin(INTEGER_TYPES) & lexical.rlike(r"^[+-]?[0-9]+$"), _lit(1))
            .when(literal & (dt == XSD_DECIMAL) & lexical.rlike(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$"), _lit(2))
            .when(literal & (dt == XSD_FLOAT) & _double_of(lexical).isNotNull(), _lit(3))
            .when(literal & (dt == XSD_DOUBLE) & _double_of(lexical).isNotNull(), _lit(4))
        )

    @_memo
    def numeric(self) -> Numeric:
        rank = self._rank()
        dec = F.when(rank <= 2, self.lexical.cast(DECIMAL))
        dbl = F.when(rank.isNotNull(), _double_of(self.lexical))
        return Numeric(rank, dec, dbl)

    @_memo
    def boolean(self) -> Column:
        valid = (self.kind == LITERAL) & (self.datatype == XSD_BOOLEAN)
        return F.when(valid & self.lexical.isin("true", "1"), F.lit(True)).when(
            valid & self.lexical.isin("false", "0"), F.lit(False)
        )

    @_memo
    def string(self) -> tuple[Column, Column]:
        is_string = (self.kind == LITERAL) & self.datatype.isin(XSD_STRING, RDF_LANGSTRING)
        return F.when(is_string, self.lexical), F.when(is_string, self.language)

    @_memo
    def datetime(self) -> Column:
        valid = (self.kind == LITERAL) & (self.datatype == XSD_DATETIME)
        return F.when(valid, self.lexical.cast("timestamp"))

    def is_category(self, category: str) -> Column:
        if self.category_hint is not None:
            return F.when(self.column.isNotNull(), F.lit(self.category_hint == category))
        literal = self.kind == LITERAL
        if category == NODE:
            return self.kind.isin(IRI, BLANK)
        if category == NUM:
            return self._rank().isNotNull()
        if category == STR:
            return literal & (self.datatype == XSD_STRING)
        if category == LANG:
            return literal & (self.datatype == RDF_LANGSTRING)
        if category == BOOL:
            return self.boolean().isNotNull()
        if category == DATETIME:
            return self.datetime().isNotNull()
        return self.category() == category

    @_memo
    def category(self) -> Column:
        if self.category_hint is not None:
            return F.lit(self.category_hint)
        literal = self.kind == LITERAL
        dt = self.datatype
        return (
            F.when(self.kind.isin(IRI, BLANK), _lit(NODE))
            .when(self._rank().isNotNull(), _lit(NUM))
            .when(literal & (dt == XSD_STRING), _lit(STR))
            .when(literal & (dt == RDF_LANGSTRING), _lit(LANG))
            .when(self.boolean().isNotNull(), _lit(BOOL))
            .when(self.datetime().isNotNull(), _lit(DATETIME))
            .when(literal, _lit(LIT))
        )

    @_memo
    def ebv(self) -> Column:
        if self.category_hint == BOOL:
            return self.boolean()
        number = self.numeric()
        lexical, _ = self.string()
        dt = self.datatype
        ill_typed = (self.kind == LITERAL) & (dt.isin([XSD_BOOLEAN, XSD_DECIMAL, XSD_FLOAT, XSD_DOUBLE, *INTEGER_TYPES]))
        return (
            F.when(self.boolean().isNotNull(), self.boolean())
            .when(number.rank.isNotNull(), (number.dbl != 0) & ~F.isnan(number.dbl))
            .when(lexical.isNotNull(), F.length(lexical) > 0)
            .when(ill_typed, F.lit(False))
        )


class NumericValue(Value):
    """A number computed by an operator or function."""

    category_hint = NUM

    def __init__(self, number: Numeric):
        self.number = number

    @_memo
    def numeric(self) -> Numeric:
        return self.number

    @_memo
    def term(self) -> Column:
        rank = self.number.rank
        lexical = (
            F.when(rank == 1, self.number.dec.cast(DecimalType(38, 0)).cast(StringType()))
            .when(rank == 2, _canonical_decimal(self.number.dec))
            .when(rank == 3, _canonical_double(self.number.dbl.cast("float").cast(DoubleType())))
            .when(rank == 4, _canonical_double(self.number.dbl))
        )
        datatype = F.when(rank == 1, XSD_INTEGER).when(rank == 2, XSD_DECIMAL).when(rank == 3, XSD_FLOAT).when(rank == 4, XSD_DOUBLE)
        return make_term(LITERAL, lexical, datatype)

    @_memo
    def category(self) -> Column:
        return F.when(self.number.rank.isNotNull(), _lit(NUM))

    @_memo
    def boolean(self) -> Column:
        return F.lit(None).cast("boolean")

    @_memo
    def string(self) -> tuple[Column, Column]:
        return F.lit(None).cast("string"), F.lit(None).cast("string")

    @_memo
    def datetime(self) -> Column:
        return F.lit(None).cast("timestamp")

    @_memo
    def ebv(self) -> Column:
        return F.when(self.number.rank.isNotNull(), (self.number.dbl != 0) & ~F.isnan(self.number.dbl))


class BooleanValue(Value):
    """A boolean computed by an operator or function (null is an error)."""

    category_hint = BOOL

    def __init__(self, column: Column):
        self.column = column

    @_memo
    def term(self) -> Column:
        return make_term(LITERAL, F.when(self.column, "true").when(~self.column, "false"), XSD_BOOLEAN)

    @_memo
    def category(self) -> Column:
        return F.when(self.column.isNotNull(), _lit(BOOL))

    @_memo
    def numeric(self) -> Numeric:
        none = F.lit(None)
        return Numeric(none.cast("int"), none.cast(DECIMAL), none.cast(DoubleType()))

    @_memo
    def boolean(self) -> Column:
        return self.column

    @_memo
    def string(self) -> tuple[Column, Column]:
        return F.lit(None).cast("string"), F.lit(None).cast("string")

    @_memo
    def datetime(self) -> Column:
        return F.lit(None).cast("timestamp")

    @_memo
    def ebv(self) -> Column:
        return self.column


class StringValue(Value):
    """A string literal computed by a function: lexical form and optional language tag."""

    def __init__(self, lexical: Column, language: Column | None = None, datatype: str | None = None):
        self.lexical = lexical
        self.language = language if language is not None else F.lit(None).cast("string")
        self.datatype = datatype

    @_memo
    def term(self) -> Column:
        if self.datatype is not None:
            return make_term(LITERAL, self.lexical, self.datatype)
        datatype = F.when(self.language.isNotNull() & (self.language != ""), RDF_LANGSTRING).otherwise(XSD_STRING)
        language = F.when(self.language != "", F.lower(self.language))
        return make_term(LITERAL, self.lexical, datatype, language)

    @_memo
    def category(self) -> Column:
        return F.when(self.lexical.isNotNull(), F.when(self.language.isNotNull() & (self.language != ""), _lit(LANG)).otherwise(_lit(STR)))

    @_memo
    def numeric(self) -> Numeric:
        return TermValue(self.term()).numeric()

    @_memo
    def boolean(self) -> Column:
        return TermValue(self.term()).boolean()

    @_memo
    def string(self) -> tuple[Column, Column]:
        if self.datatype is not None and self.datatype not in (XSD_STRING, RDF_LANGSTRING):
            return F.lit(None).cast("string"), F.lit(None).cast("string")
        return self.lexical, F.when(self.language != "", self.language)

    @_memo
    def datetime(self) -> Column:
        return TermValue(self.term()).datetime()

    @_memo
    def ebv(self) -> Column:
        if self.datatype is not None:
            return TermValue(self.term()).ebv()
        return F.when(self.lexical.isNotNull(), F.length(self.lexical) > 0)


class DateTimeValue(Value):
    """An xsd:dateTime computed by the engine (timestamps of stream triples, NOW())."""

    category_hint = DATETIME

    def __init__(self, column: Column):
        self.column = column

    @_memo
    def term(self) -> Column:
        return make_term(LITERAL, format_datetime(self.column), XSD_DATETIME)

    @_memo
    def category(self) -> Column:
        return F.when(self.column.isNotNull(), _lit(DATETIME))

    @_memo
    def numeric(self) -> Numeric:
        return BooleanValue(F.lit(None).cast("boolean")).numeric()

    @_memo
    def boolean(self) -> Column:
        return F.lit(None).cast("boolean")

    @_memo
    def string(self) -> tuple[Column, Column]:
        return F.lit(None).cast("string"), F.lit(None).cast("string")

    @_memo
    def datetime(self) -> Column:
        return self.column

    @_memo
    def ebv(self) -> Column:
        return F.lit(None).cast("boolean")


# --- formatting ------------------------------------------------------------------------------------------


def format_datetime(timestamp: Column) -> Column:
    """An xsd:dateTime lexical form in UTC with 'Z', with a fraction only when there is one."""
    base = F.date_format(timestamp, "yyyy-MM-dd'T'HH:mm:ss")
    fraction = F.regexp_replace(F.date_format(timestamp, "SSSSSS"), "0+$", "")
    return F.when(timestamp.isNotNull(), F.concat(base, F.when(fraction != "", F.concat(F.lit("."), fraction)).otherwise(""), F.lit("Z")))


def _double_of(lexical: Column) -> Column:
    """The double of an xsd:double/xsd:float lexical form (INF, -INF and NaN included); null when invalid."""
    java = F.regexp_replace(lexical, r"^([+-]?)INF$", "$1Infinity")
    valid = lexical.rlike(r"^[+-]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?|INF)$|^NaN$")
    return F.when(valid, java.cast(DoubleType()))


def _canonical_decimal(dec: Column) -> Column:
    # not format_string("%s") or a cast to string: Java writes small decimals in scientific notation
    # ("0E-18"), which is no xsd:decimal lexical form
    plain = F.regexp_replace(F.format_number(dec.cast(DecimalType(38, 18)), 18), ",", "")
    trimmed = F.regexp_replace(plain, r"(\.[0-9]*?)0+$", "$1")
    return F.regexp_replace(trimmed, r"\.$", ".0")


def _canonical_double(dbl: Column) -> Column:
    text = dbl.cast(StringType())
    return (
        F.when(F.isnan(dbl), F.lit("NaN"))
        .when(dbl == float("inf"), F.lit("INF"))
        .when(dbl == float("-inf"), F.lit("-INF"))
        .otherwise(F.when(text.contains("E"), text).otherwise(F.concat(text, F.lit("E0"))))
    )


# --- operators -------------------------------------------------------------------------------------------


def arithmetic(op: str, left: Value, right: Value) -> NumericValue:
    """``+ - * /`` with SPARQL numeric type promotion (integer division gives a decimal)."""
    a, b = left.numeric(), right.numeric()
    rank = F.greatest(a.rank, b.rank)
    rank = F.when(a.rank.isNotNull() & b.rank.isNotNull(), rank)
    a_dec, b_dec = a.dec, b.dec
    a_dbl, b_dbl = a.dbl, b.dbl
    if op == "+":
        dec, dbl = a_dec + b_dec, a_dbl + b_dbl
    elif op == "-":
        dec, dbl = a_dec - b_dec, a_dbl - b_dbl
    elif op == "*":
        dec, dbl = a_dec * b_dec, a_dbl * b_dbl
    else:
        rank = F.when(rank.isNotNull(), F.greatest(rank, F.lit(2)))
        # Spark keeps only 6 fractional digits when dividing decimal(38,18) values: take the integral
        # quotient exactly and the remainder's fraction in double precision (about 16 digits).
        quotient = (a_dec - _mod(a_dec, b_dec)) / b_dec
        remainder = _mod(a_dec, b_dec)
        dec = F.when(b_dec != 0, quotient.cast(DecimalType(38, 0)).cast(DECIMAL) + (remainder.cast(DoubleType()) / b_dec.cast(DoubleType())).cast(DECIMAL))
        infinity = F.when(a_dbl > 0, F.lit(float("inf"))).when(a_dbl < 0, F.lit(float("-inf"))).otherwise(F.lit(float("nan")))
        dbl = F.when(b_dbl == 0, infinity).otherwise(a_dbl / b_dbl)
        # integer or decimal division by zero is an error
        rank = F.when(~((rank <= 2) & (b_dec == 0)), rank)
    return NumericValue(Numeric(rank, F.when(rank <= 2, dec.cast(DECIMAL)), F.when(rank.isNotNull(), dbl.cast(DoubleType()))))


def _mod(a: Column, b: Column) -> Column:
    """The remainder of a truncating division, with the sign of the dividend (exact on decimals)."""
    return F.when(b != 0, a % b)


def negate(value: Value) -> NumericValue:
    n = value.numeric()
    return NumericValue(Numeric(n.rank, -n.dec, -n.dbl))


def plus(value: Value) -> NumericValue:
    return NumericValue(value.numeric())


def _numbers_compare(op: str, a: Numeric, b: Numeric) -> Column:
    exact = F.greatest(a.rank, b.rank) <= 2
    dec_result = _apply(op, a.dec, b.dec)
    dbl_result = _apply(op, a.dbl, b.dbl)
    either_nan = F.isnan(a.dbl) | F.isnan(b.dbl)
    nan_result = F.lit(op == "!=")
    return F.when(exact, dec_result).when(either_nan, nan_result).otherwise(dbl_result)


def _apply(op: str, a: Column, b: Column) -> Column:
    return {"=": a == b, "!=": a != b, "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]


def compare(op: str, left: Value, right: Value) -> BooleanValue:
    """A comparison by the operator mapping of §17.3, falling back to RDFterm-equal for ``=`` and ``!=``.

    When the category of a side is known when compiling (a constant, or a value computed as a number), only
    the branches that can apply are generated.
    """
    ca, cb = left.category_hint, right.category_hint
    if ca == cb == NUM:
        return BooleanValue(_numbers_compare(op, left.numeric(), right.numeric()))
    if op in ("=", "!=") and (ca == NODE or cb == NODE):
        # An IRI or blank node equals only itself.
        equal = left.term() == right.term()
        return BooleanValue(equal if op == "=" else ~equal)
    known = {c for c in (ca, cb) if c is not None}
    categories = [c for c in (NUM, STR, BOOL, DATETIME) if not known or c in known]
    la, langa = left.string()
    lb, langb = right.string()
    comparisons = {
        NUM: lambda: _numbers_compare(op, left.numeric(), right.numeric()),
        STR: lambda: _apply(op, la, lb),
        BOOL: lambda: _apply(op, left.boolean(), right.boolean()),
        DATETIME: lambda: _apply(op, left.datetime(), right.datetime()),
    }
    result = F.when(left.term().isNull() | right.term().isNull(), F.lit(None).cast("boolean"))
    for category in categories:
        result = result.when(left.is_category(category) & right.is_category(category), comparisons[category]())
    if op in ("=", "!="):
        if not known or LANG in known:
            lang_equal = (la == lb) & (F.lower(langa) == F.lower(langb))
            result = result.when(left.is_category(LANG) & right.is_category(LANG), lang_equal if op == "=" else ~lang_equal)
        term_equal = left.term() == right.term()
        result = result.when(term_equal, F.lit(op == "="))
        both_literals = (left.term().getField("kind") == LITERAL) & (right.term().getField("kind") == LITERAL)
        result = result.when(both_literals, F.lit(None).cast("boolean"))  # different literals, no operator: error
        result = result.otherwise(F.lit(op == "!="))
    return BooleanValue(result)


def same_term(left: Value, right: Value) -> BooleanValue:
    return BooleanValue(left.term() == right.term())


def logical_and(left: Value, right: Value) -> BooleanValue:
    return BooleanValue(left.ebv() & right.ebv())


def logical_or(left: Value, right: Value) -> BooleanValue:
    return BooleanValue(left.ebv() | right.ebv())


def logical_not(value: Value) -> BooleanValue:
    return BooleanValue(~value.ebv())


def order_key(value: Value) -> Column:
    """A sort key giving SPARQL's ORDER BY order (§15.1): unbound, blank nodes, IRIs, then literals — numbers by
    value, then date-times by instant, then other literals by lexical form — deterministic within each kind."""
    term = value.term()
    kind = term.getField("kind")
    # the value's own views: a computed number or date-time is not formatted and parsed again
    number = value.numeric()
    instant = value.datetime()
    group = (
        F.when(term.isNull(), 0)
        .when(kind == BLANK, 1)
        .when(kind == IRI, 2)
        .when(number.rank.isNotNull(), 3)
        .when(instant.isNotNull(), 4)
        .otherwise(5)
    )
    return F.struct(
        group.alias("group"),
        number.dbl.alias("number"),
        instant.alias("instant"),
        term.getField("value").alias("value"),
        term.getField("datatype").alias("datatype"),
        term.getField("language").alias("language"),
    )
