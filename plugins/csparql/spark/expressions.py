"""Algebra expressions to Spark columns: ``ExpressionCompiler(scope).value(expr)`` gives a ``Value``.

Every SPARQL 1.1 built-in maps to Spark's own functions, so expressions run inside Spark's code generation
with no Python UDF. An error anywhere gives null, which the operators of ``values`` propagate as SPARQL's
error. The C-SPARQL ``timestamp()`` reads the provenance columns the compiler keeps for stream triples.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType
from rdflib import BNode, Literal, URIRef, Variable

from csparql.core.language import expressions as ex
from csparql.spark import values as v
from csparql.spark.terms import constant, make_term, null_term
from csparql.spark.values import (
    _memo,
    BooleanValue,
    DateTimeValue,
    Numeric,
    NumericValue,
    StringValue,
    TermValue,
    Value,
)
from csparql.storage.terms import BLANK, IRI, LITERAL
from csparql.storage.vocabulary import (
    RDF_LANGSTRING,
    XSD,
    XSD_BOOLEAN,
    XSD_DATETIME,
    XSD_DECIMAL,
    XSD_DOUBLE,
    XSD_FLOAT,
    XSD_INTEGER,
    XSD_STRING,
)


@dataclass
class Scope:
    """What an expression can see in a row: the column of each bound variable, the provenance columns of the
    stream triples that bound it (timestamp column, IRI of the stream), and columns computed beforehand for
    EXISTS and f:timestamp (keyed by the expression node)."""

    columns: dict[Variable, str]
    stamps: dict[Variable, list[tuple[str, str]]] = field(default_factory=dict)  # (timestamp column, stream IRI)
    precomputed: dict[int, str] = field(default_factory=dict)
    now: int | None = None  # the evaluation instant (microseconds), which NOW() returns
    solution_id: str | None = None  # a column identifying each solution (for BNODE(string))
    base: str | None = None  # the query's base IRI, against which IRI("relative") resolves (§17.4.2.8)


class UnsupportedExpression(Exception):
    """An expression this compiler cannot translate (never a user error: the front end prevents those)."""


def _null_value() -> TermValue:
    return TermValue(null_term())


_LET_NAMES = itertools.count()
_FIRST = float("inf")  # the level of bound columns that only read input columns


class _SharedTermValue(TermValue):
    """A term whose views used several times (a number's rank, exact and double parts; a boolean) are bound to
    columns of their own by ``share`` (see ``ExpressionCompiler``)."""

    def __init__(self, column: Column, category_hint: str | None, share):
        super().__init__(column, category_hint)
        self._share = share

    @_memo
    def _rank(self) -> Column:
        return self._share(TermValue._rank.__wrapped__(self))

    @_memo
    def numeric(self) -> Numeric:
        number = TermValue.numeric.__wrapped__(self)
        return Numeric(number.rank, self._share(number.dec), self._share(number.dbl))

    @_memo
    def boolean(self) -> Column:
        return self._share(TermValue.boolean.__wrapped__(self))


class ExpressionCompiler:
    """Compiles expressions over the columns of a scope.

    Every compound sub-expression's value is bound to a column of its own ("let"), and its parent refers to
    that column: a value is used several times by the operators above it (a number's rank, exact and double
    parts; a term's kind, lexical form and datatype), and inlining it each time would make the expression
    tree grow exponentially with nesting. The caller adds the bound columns to its DataFrame with ``bind``
    before using the expression, and drops ``let_names`` afterwards.
    """

    def __init__(self, scope: Scope):
        self.scope = scope
        self._depth = 0
        self._lets: dict[int, dict[str, Column]] = {}
        self.let_names: list[str] = []
        self._variables: dict[Variable, Value] = {}

    def bind(self, df):
        """The DataFrame with the bound sub-expression columns added (innermost first)."""
        if not self._lets:
            return df
        for level in sorted(self._lets, reverse=True):
            df = df.withColumns(self._lets[level])
        self._lets = {}
        return df

    def _let(self, column: Column, level: int) -> Column:
        name = f"__x{next(_LET_NAMES)}"
        self._lets.setdefault(level, {})[name] = column
        self.let_names.append(name)
        return F.col(name)

    def shared(self, value: Value) -> Value:
        """A value whose views are bound to columns, for a caller that uses a top-level value several times."""
        if isinstance(value, _SharedTermValue):
            return value
        return self._seal(value, self._depth + 1)

    def _seal(self, value: Value, level: int) -> Value:
        if isinstance(value, _ConstantNumber):
            return value
        if isinstance(value, NumericValue):
            n = value.number
            return NumericValue(Numeric(self._let(n.rank, level), self._let(n.dec, level), self._let(n.dbl, level)))
        if isinstance(value, BooleanValue):
            return BooleanValue(self._let(value.column, level))
        if isinstance(value, StringValue):
            return StringValue(self._let(value.lexical, level), self._let(value.language, level), value.datatype)
        if isinstance(value, DateTimeValue):
            return DateTimeValue(self._let(value.column, level))
        if type(value) is TermValue:
            return _SharedTermValue(self._let(value.column, level), value.category_hint, lambda c: self._let(c, level - 0.5))
        return value

    # entry points

    def value(self, expression: ex.Expr) -> Value:
        self._depth += 1
        try:
            result = self._value(expression)
        finally:
            self._depth -= 1
        if self._depth > 0 and isinstance(expression, ex.Expression) and not isinstance(expression, (ex.Exists, ex.TripleTimestamp)):
            result = self._seal(result, self._depth + 1)
        return result

    def _value(self, expression: ex.Expr) -> Value:
        match expression:
            case Variable():
                name = self.scope.columns.get(expression)
                if name is None:
                    return _null_value()
                if self._lets is None:
                    return TermValue(F.col(f"`{name}`"))
                if expression not in self._variables:
                    # views of an input column only need input columns: bind them first of all
                    self._variables[expression] = _SharedTermValue(F.col(f"`{name}`"), None, lambda c: self._let(c, _FIRST))
                return self._variables[expression]
            case URIRef() | BNode():
                return TermValue(constant(expression), v.NODE)
            case Literal():
                return _constant_literal(expression)
            case ex.Or(left, right):
                return v.logical_or(self.value(left), self.value(right))
            case ex.And(left, right):
                return v.logical_and(self.value(left), self.value(right))
            case ex.Not(operand):
                return v.logical_not(self.value(operand))
            case ex.Compare(op, left, right):
                return v.compare(op, self.value(left), self.value(right))
            case ex.In(operand, options, negated):
                target = self.value(operand)
                result = BooleanValue(F.lit(False))
                for option in options:
                    result = v.logical_or(result, v.compare("=", target, self.value(option)))
                return v.logical_not(result) if negated else result
            case ex.Arithmetic(op, left, right):
                return v.arithmetic(op, self.value(left), self.value(right))
            case ex.Unary("-", operand):
                return v.negate(self.value(operand))
            case ex.Unary("+", operand):
                return v.plus(self.value(operand))
            case ex.BuiltinCall(name, args):
                return self.builtin(name, args)
            case ex.FunctionCall(iri, args, _):
                return self.function(iri, args)
            case ex.Timestamp(var, stream, _):
                return self.timestamp(var, stream)
            case ex.TripleTimestamp() | ex.Exists():
                column = self.scope.precomputed.get(id(expression))
                if column is None:
                    raise UnsupportedExpression(f"{type(expression).__name__} was not prepared by the compiler")
                if isinstance(expression, ex.Exists):
                    return BooleanValue(F.col(column))
                return DateTimeValue(F.col(column))
        raise UnsupportedExpression(f"cannot compile expression {expression!r}")

    def term(self, expression: ex.Expr) -> Column:
        """The expression's value as an RDF term column (null for an error)."""
        return self.value(expression).term()

    def condition(self, expression: ex.Expr) -> Column:
        """The expression's effective boolean value (null for an error), for FILTER."""
        return self.value(expression).ebv()

    # C-SPARQL timestamps

    def timestamp(self, var: Variable, stream) -> Value:
        stamps = self.scope.stamps.get(var, [])
        if not stamps:
            return DateTimeValue(F.lit(None).cast("timestamp"))
        # each stamp is (timestamp column, IRI of the stream whose triples it covers)
        if stream is None:
            columns = [F.col(ts) for ts, _ in stamps]
        elif isinstance(stream, URIRef):
            columns = [F.col(ts) for ts, src in stamps if src == str(stream)]
            if not columns:
                return DateTimeValue(F.lit(None).cast("timestamp"))
        else:
            stream_column = self.value(stream).term()
            columns = [
                F.when((stream_column.getField("kind") == IRI) & (stream_column.getField("value") == F.lit(src)), F.col(ts))
                for ts, src in stamps
            ]
        return DateTimeValue(columns[0] if len(columns) == 1 else F.greatest(*columns))

    # built-ins (§17.4)

    def builtin(self, name: str, args: tuple) -> Value:
        values = [self.value(a) for a in args] if name != "BOUND" else []
        handler = getattr(self, f"_fn_{name.lower()}", None)
        if handler is None:
            raise UnsupportedExpression(f"the built-in {name} is not supported")
        if name == "BOUND":
            return handler(args)
        return handler(*values)

    def _fn_bound(self, args) -> Value:
        name = self.scope.columns.get(args[0])
        return BooleanValue(F.col(f"`{name}`").isNotNull() if name else F.lit(False))

    def _fn_if(self, condition: Value, then: Value, otherwise: Value) -> Value:
        test = condition.ebv()
        return TermValue(F.when(test, then.term()).when(~test, otherwise.term()))

    def _fn_coalesce(self, *values: Value) -> Value:
        if not values:
            return _null_value()
        return TermValue(F.coalesce(*(x.term() for x in values)))

    def _fn_isiri(self, value: Value) -> Value:
        term = value.term()
        return BooleanValue(F.when(term.isNotNull(), term.getField("kind") == IRI))

    _fn_isuri = _fn_isiri

    def _fn_isblank(self, value: Value) -> Value:
        term = value.term()
        return BooleanValue(F.when(term.isNotNull(), term.getField("kind") == BLANK))

    def _fn_isliteral(self, value: Value) -> Value:
        term = value.term()
        return BooleanValue(F.when(term.isNotNull(), term.getField("kind") == LITERAL))

    def _fn_isnumeric(self, value: Value) -> Value:
        term = value.term()
        return BooleanValue(F.when(term.isNotNull(), value.numeric().rank.isNotNull()))

    def _fn_sameterm(self, left: Value, right: Value) -> Value:
        return v.same_term(left, right)

    def _fn_str(self, value: Value) -> Value:
        term = value.term()
        return StringValue(F.when(term.getField("kind").isin(IRI, LITERAL), term.getField("value")), datatype=XSD_STRING)

    def _fn_lang(self, value: Value) -> Value:
        term = value.term()
        return StringValue(
            F.when(term.getField("kind") == LITERAL, F.coalesce(term.getField("language"), F.lit(""))), datatype=XSD_STRING
        )

    def _fn_datatype(self, value: Value) -> Value:
        term = value.term()
        return TermValue(make_term(IRI, F.when(term.getField("kind") == LITERAL, term.getField("datatype"))), v.NODE)

    def _fn_iri(self, value: Value) -> Value:
        term = value.term()
        lexical, language = value.string()
        from_string = F.when(language.isNull(), lexical)
        if self.scope.base is not None:
            from_string = _resolve(from_string, self.scope.base)
        iri = F.when(term.getField("kind") == IRI, term.getField("value")).otherwise(from_string)
        return TermValue(make_term(IRI, iri), v.NODE)

    _fn_uri = _fn_iri

    def _fn_bnode(self, *values: Value) -> Value:
        if not values:
            return TermValue(make_term(BLANK, F.concat(F.lit("b"), F.replace(F.expr("uuid()"), F.lit("-"), F.lit("")))), v.NODE)
        lexical, language = values[0].string()
        # the same blank node for the same string within one solution, another one in another solution
        # (§17.4.2.9): the label hashes the string with the solution's identity
        if self.scope.solution_id is not None:
            solution = F.col(self.scope.solution_id).cast("string")
        else:
            columns = [F.col(f"`{name}`") for name in self.scope.columns.values()]
            solution = F.xxhash64(*columns).cast("string") if columns else F.lit("")
        label = F.when(language.isNull(), F.concat(F.lit("b"), F.md5(F.concat_ws("|", lexical, solution))))
        return TermValue(make_term(BLANK, label), v.NODE)

    def _fn_strlang(self, text: Value, tag: Value) -> Value:
        lexical, language = text.string()
        tag_lexical, tag_language = tag.string()
        ok = language.isNull() & tag_language.isNull() & (tag_lexical != "")
        return StringValue(F.when(ok, lexical), F.when(ok, F.lower(tag_lexical)))

    def _fn_strdt(self, text: Value, datatype: Value) -> Value:
        lexical, language = text.string()
        dt = datatype.term()
        ok = language.isNull() & (dt.getField("kind") == IRI)
        return TermValue(make_term(LITERAL, F.when(ok, lexical), dt.getField("value")))

    def _fn_strlen(self, value: Value) -> Value:
        lexical, _ = value.string()
        return _integer(F.length(lexical))

    def _fn_ucase(self, value: Value) -> Value:
        lexical, language = value.string()
        return StringValue(F.upper(lexical), language)

    def _fn_lcase(self, value: Value) -> Value:
        lexical, language = value.string()
        return StringValue(F.lower(lexical), language)

    def _compatible(self, a: Value, b: Value) -> tuple[Column, Column, Column, Column]:
        la, langa = a.string()
        lb, langb = b.string()
        ok = la.isNotNull() & lb.isNotNull() & (langb.isNull() | (F.lower(langa) == F.lower(langb)))
        return la, lb, langa, ok

    def _fn_contains(self, a: Value, b: Value) -> Value:
        la, lb, _, ok = self._compatible(a, b)
        return BooleanValue(F.when(ok, F.instr(la, lb) > 0))

    def _fn_strstarts(self, a: Value, b: Value) -> Value:
        la, lb, _, ok = self._compatible(a, b)
        return BooleanValue(F.when(ok, la.startswith(lb)))

    def _fn_strends(self, a: Value, b: Value) -> Value:
        la, lb, _, ok = self._compatible(a, b)
        return BooleanValue(F.when(ok, la.endswith(lb)))

    def _fn_strbefore(self, a: Value, b: Value) -> Value:
        la, lb, langa, ok = self._compatible(a, b)
        position = F.instr(la, lb)
        found = position > 0
        result = F.when(ok & found, la.substr(F.lit(1), position - 1)).when(ok, F.lit(""))
        return StringValue(result, F.when(found & ok, langa))

    def _fn_strafter(self, a: Value, b: Value) -> Value:
        la, lb, langa, ok = self._compatible(a, b)
        position = F.instr(la, lb)
        found = position > 0
        tail = F.when(ok & found, _substring_from(la, position + F.length(lb))).when(ok, F.lit(""))
        return StringValue(tail, F.when(found & ok, langa))

    def _fn_substr(self, text: Value, start: Value, length: Value | None = None) -> Value:
        lexical, language = text.string()
        begin = F.round(start.numeric().dbl)
        if length is None:
            first = F.greatest(begin, F.lit(1.0))
            result = _substring_from(lexical, first.cast("int"))
        else:
            end = begin + F.round(length.numeric().dbl)
            first = F.greatest(begin, F.lit(1.0))
            count = F.greatest(end - first, F.lit(0.0))
            result = F.when(~F.isnan(end), lexical.substr(first.cast("int"), count.cast("int")))
        return StringValue(result, language)

    def _fn_concat(self, *values: Value) -> Value:
        if not values:
            return StringValue(F.lit(""))
        parts = [x.string() for x in values]
        lexical = F.concat(*(p[0] for p in parts))
        languages = [F.lower(p[1]) for p in parts]
        same = languages[0]
        for other in languages[1:]:
            same = F.when(same == other, same)
        return StringValue(lexical, same)

    def _fn_replace(self, text: Value, pattern: Value, replacement: Value, flags: Value | None = None) -> Value:
        lexical, language = text.string()
        regex = _java_regex(pattern.string()[0], flags.string()[0] if flags is not None else None)
        replaced = F.regexp_replace(lexical, regex, replacement.string()[0])
        return StringValue(replaced, language)

    def _fn_regex(self, text: Value, pattern: Value, flags: Value | None = None) -> Value:
        lexical, _ = text.string()
        regex = _java_regex(pattern.string()[0], flags.string()[0] if flags is not None else None)
        return BooleanValue(F.when(lexical.isNotNull() & regex.isNotNull(), F.regexp_like(lexical, regex)))

    def _fn_encode_for_uri(self, value: Value) -> Value:
        lexical, _ = value.string()
        encoded = F.url_encode(lexical)
        encoded = F.replace(F.replace(F.replace(encoded, F.lit("+"), F.lit("%20")), F.lit("*"), F.lit("%2A")), F.lit("%7E"), F.lit("~"))
        return StringValue(encoded, datatype=XSD_STRING)

    def _fn_langmatches(self, tag: Value, pattern: Value) -> Value:
        tag_lexical, _ = tag.string()
        range_lexical, _ = pattern.string()
        t, r = F.lower(tag_lexical), F.lower(range_lexical)
        match = F.when(r == "*", t != "").otherwise((t == r) | t.startswith(F.concat(r, F.lit("-"))))
        return BooleanValue(F.when(tag_lexical.isNotNull() & range_lexical.isNotNull(), match))

    def _fn_md5(self, value: Value) -> Value:
        return StringValue(F.md5(value.string()[0]), datatype=XSD_STRING)

    def _fn_sha1(self, value: Value) -> Value:
        return StringValue(F.sha1(value.string()[0]), datatype=XSD_STRING)

    def _fn_sha256(self, value: Value) -> Value:
        return StringValue(F.sha2(value.string()[0], 256), datatype=XSD_STRING)

    def _fn_sha384(self, value: Value) -> Value:
        return StringValue(F.sha2(value.string()[0], 384), datatype=XSD_STRING)

    def _fn_sha512(self, value: Value) -> Value:
        return StringValue(F.sha2(value.string()[0], 512), datatype=XSD_STRING)

    def _fn_uuid(self) -> Value:
        return TermValue(make_term(IRI, F.concat(F.lit("urn:uuid:"), F.expr("uuid()"))), v.NODE)

    def _fn_struuid(self) -> Value:
        return StringValue(F.expr("uuid()"), datatype=XSD_STRING)

    def _fn_rand(self) -> Value:
        value = F.rand()
        return NumericValue(Numeric(F.lit(4), F.lit(None).cast(v.DECIMAL), value))

    def _fn_now(self) -> Value:
        if self.scope.now is None:
            return DateTimeValue(F.current_timestamp())
        return DateTimeValue(F.timestamp_micros(F.lit(self.scope.now)))

    def _fn_abs(self, value: Value) -> Value:
        n = value.numeric()
        return NumericValue(Numeric(n.rank, F.abs(n.dec), F.abs(n.dbl)))

    def _fn_ceil(self, value: Value) -> Value:
        n = value.numeric()
        return NumericValue(Numeric(n.rank, F.ceil(n.dec).cast(v.DECIMAL), F.ceil(n.dbl).cast(DoubleType())))

    def _fn_floor(self, value: Value) -> Value:
        n = value.numeric()
        return NumericValue(Numeric(n.rank, F.floor(n.dec).cast(v.DECIMAL), F.floor(n.dbl).cast(DoubleType())))

    def _fn_round(self, value: Value) -> Value:
        n = value.numeric()
        # XPath fn:round rounds halves towards positive infinity.
        return NumericValue(
            Numeric(n.rank, F.floor(n.dec + F.lit(Decimal("0.5"))).cast(v.DECIMAL), F.floor(n.dbl + F.lit(0.5)).cast(DoubleType()))
        )

    # date and time accessors read the lexical form, which keeps the written time zone (§17.4.5)

    def _datetime_part(self, value: Value, group: int) -> Column:
        term = value.term()
        lexical = F.when((term.getField("kind") == LITERAL) & (term.getField("datatype") == XSD_DATETIME), term.getField("value"))
        pattern = r"^(-?\d{4,})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2}(?:\.\d+)?)(Z|[+-]\d{2}:\d{2})?$"
        part = F.regexp_extract(lexical, pattern, group)
        return F.when(lexical.rlike(pattern), part)

    def _fn_year(self, value: Value) -> Value:
        return _integer(self._datetime_part(value, 1).cast("long"))

    def _fn_month(self, value: Value) -> Value:
        return _integer(self._datetime_part(value, 2).cast("long"))

    def _fn_day(self, value: Value) -> Value:
        return _integer(self._datetime_part(value, 3).cast("long"))

    def _fn_hours(self, value: Value) -> Value:
        return _integer(self._datetime_part(value, 4).cast("long"))

    def _fn_minutes(self, value: Value) -> Value:
        return _integer(self._datetime_part(value, 5).cast("long"))

    def _fn_seconds(self, value: Value) -> Value:
        seconds = self._datetime_part(value, 6).cast(v.DECIMAL)
        return NumericValue(Numeric(F.when(seconds.isNotNull(), F.lit(2)), seconds, seconds.cast(DoubleType())))

    def _fn_timezone(self, value: Value) -> Value:
        zone = self._datetime_part(value, 7)
        sign = F.substring(zone, 1, 1)
        hours = F.substring(zone, 2, 2).cast("int")
        minutes = F.substring(zone, 5, 2).cast("int")
        body = F.concat(
            F.lit("PT"),
            F.when(hours > 0, F.concat(hours.cast("string"), F.lit("H"))).otherwise(F.lit("")),
            F.when(minutes > 0, F.concat(minutes.cast("string"), F.lit("M"))).otherwise(F.lit("")),
        )
        text = F.when(zone == "Z", F.lit("PT0S")).when(zone != "", F.concat(F.when(sign == "-", F.lit("-")).otherwise(F.lit("")), F.when((hours == 0) & (minutes == 0), F.lit("PT0S")).otherwise(body)))
        return TermValue(make_term(LITERAL, text, XSD + "dayTimeDuration"))

    def _fn_tz(self, value: Value) -> Value:
        zone = self._datetime_part(value, 7)
        return StringValue(zone, datatype=XSD_STRING)

    # functions named by IRI: XSD casts (§17.5); anything else is an error value

    def function(self, iri: URIRef, args: tuple) -> Value:
        values = [self.value(a) for a in args]
        name = str(iri)
        if name.startswith(XSD) and len(values) == 1:
            cast = getattr(self, f"_cast_{name[len(XSD):].lower()}", None)
            if cast is not None:
                return cast(values[0])
        return _null_value()

    def _cast_string(self, value: Value) -> Value:
        term = value.term()
        return StringValue(F.when(term.getField("kind").isin(IRI, LITERAL), term.getField("value")), datatype=XSD_STRING)

    def _cast_boolean(self, value: Value) -> Value:
        term = value.term()
        n = value.numeric()
        lexical, language = value.string()
        from_string = F.when(language.isNull() & lexical.isin("true", "1"), F.lit(True)).when(
            language.isNull() & lexical.isin("false", "0"), F.lit(False)
        )
        result = F.when(value.boolean().isNotNull(), value.boolean()).when(
            n.rank.isNotNull(), (n.dbl != 0) & ~F.isnan(n.dbl)
        ).otherwise(from_string)
        return BooleanValue(F.when(term.isNotNull(), result))

    def _numeric_source(self, value: Value) -> tuple[Numeric, Column]:
        """The number a cast starts from: a number, a boolean (1/0), or a string's lexical form."""
        n = value.numeric()
        lexical, language = value.string()
        boolean = value.boolean()
        text = F.when(language.isNull(), F.trim(lexical))
        return n, F.when(n.rank.isNull() & boolean.isNotNull(), F.when(boolean, F.lit("1")).otherwise(F.lit("0"))).otherwise(text)

    def _cast_integer(self, value: Value) -> Value:
        n, text = self._numeric_source(value)
        from_number = F.when(n.rank <= 2, F.when(n.dec >= 0, F.floor(n.dec)).otherwise(F.ceil(n.dec))).when(
            n.rank.isNotNull() & ~F.isnan(n.dbl) & (F.abs(n.dbl) != float("inf")),
            F.when(n.dbl >= 0, F.floor(n.dbl)).otherwise(F.ceil(n.dbl)).cast(v.DECIMAL),
        )
        from_text = F.when(text.rlike(r"^[+-]?[0-9]+$"), text.cast(v.DECIMAL))
        result = F.coalesce(from_number, from_text).cast(v.DECIMAL)
        return NumericValue(Numeric(F.when(result.isNotNull(), F.lit(1)), result, result.cast(DoubleType())))

    def _cast_decimal(self, value: Value) -> Value:
        n, text = self._numeric_source(value)
        from_number = F.when(n.rank <= 2, n.dec).when(
            n.rank.isNotNull() & ~F.isnan(n.dbl) & (F.abs(n.dbl) != float("inf")), n.dbl.cast(v.DECIMAL)
        )
        from_text = F.when(text.rlike(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$"), text.cast(v.DECIMAL))
        result = F.coalesce(from_number, from_text)
        return NumericValue(Numeric(F.when(result.isNotNull(), F.lit(2)), result, result.cast(DoubleType())))

    def _cast_double(self, value: Value, rank: int = 4) -> Value:
        n, text = self._numeric_source(value)
        from_text = v._double_of(text)
        result = F.when(n.rank.isNotNull(), n.dbl).otherwise(from_text)
        return NumericValue(Numeric(F.when(result.isNotNull(), F.lit(rank)), F.lit(None).cast(v.DECIMAL), result))

    def _cast_float(self, value: Value) -> Value:
        return self._cast_double(value, rank=3)

    def _cast_datetime(self, value: Value) -> Value:
        lexical, language = value.string()
        term = value.term()
        source = F.when(term.getField("datatype") == XSD_DATETIME, term.getField("value")).otherwise(F.when(language.isNull(), lexical))
        valid = source.rlike(r"^-?\d{4,}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?$")
        return TermValue(make_term(LITERAL, F.when(valid & source.cast("timestamp").isNotNull(), source), XSD_DATETIME))


# --- helpers -------------------------------------------------------------------------------------------------


def _resolve(reference: Column, base: str) -> Column:
    """A string resolved against a base IRI (§5.2 of RFC 3986, without removing dot segments)."""
    from urllib.parse import urlsplit

    parts = urlsplit(base)
    without_fragment = base.split("#", 1)[0]
    without_query = without_fragment.split("?", 1)[0]
    directory = without_query[: without_query.rfind("/") + 1] if "/" in parts.path else without_query + "/"
    origin = f"{parts.scheme}://{parts.netloc}" if parts.netloc else f"{parts.scheme}:"
    return (
        F.when(reference.rlike(r"^[A-Za-z][A-Za-z0-9+.\-]*:"), reference)
        .when(reference == "", F.lit(without_fragment))
        .when(reference.startswith("#"), F.concat(F.lit(without_fragment), reference))
        .when(reference.startswith("?"), F.concat(F.lit(without_query), reference))
        .when(reference.startswith("//"), F.concat(F.lit(parts.scheme + ":"), reference))
        .when(reference.startswith("/"), F.concat(F.lit(origin), reference))
        .otherwise(F.concat(F.lit(directory), reference))
    )


def _integer(column: Column) -> NumericValue:
    dec = column.cast(v.DECIMAL)
    return NumericValue(Numeric(F.when(column.isNotNull(), F.lit(1)), dec, column.cast(DoubleType())))


def _substring_from(lexical: Column, start: Column) -> Column:
    """The characters of ``lexical`` from 1-based position ``start`` to the end."""
    return lexical.substr(start, F.greatest(F.length(lexical) - start + 1, F.lit(0)))


def _java_regex(pattern: Column, flags: Column | None) -> Column:
    """An XPath regular expression (fn:matches) as a Java one: flags become inline modifiers; 'q' quotes."""
    if flags is None:
        return pattern
    quoted = F.when(flags.contains("q"), F.concat(F.lit(r"\Q"), F.replace(pattern, F.lit(r"\E"), F.lit(r"\E\\E\Q")), F.lit(r"\E"))).otherwise(pattern)
    inline = F.regexp_replace(flags, "[^imsx]", "")
    return F.when(flags.rlike("^[imsxq]*$"), F.when(inline != "", F.concat(F.lit("(?"), inline, F.lit(")"), quoted)).otherwise(quoted))


_NUMERIC_RANK = {XSD_INTEGER: 1, XSD_DECIMAL: 2, XSD_FLOAT: 3, XSD_DOUBLE: 4}


def _constant_literal(term: Literal) -> Value:
    """A literal constant: its term as written, with its category known at compile time."""
    datatype = str(term.datatype) if term.datatype else (RDF_LANGSTRING if term.language else XSD_STRING)
    column = constant(term)
    lexical = str(term)
    rank = _NUMERIC_RANK.get(datatype) or (1 if datatype in v.INTEGER_TYPES else None)
    if rank is not None:
        number = _parse_number(lexical, rank)
        if number is not None:
            dec, dbl = number
            return _ConstantNumber(column, Numeric(F.lit(rank), F.lit(dec).cast(v.DECIMAL) if dec is not None else F.lit(None).cast(v.DECIMAL), F.lit(dbl).cast(DoubleType())))
        return TermValue(column, v.LIT)
    if datatype == XSD_STRING:
        return TermValue(column, v.STR)
    if datatype == RDF_LANGSTRING:
        return TermValue(column, v.LANG)
    if datatype == XSD_BOOLEAN and lexical in ("true", "false", "1", "0"):
        return TermValue(column, v.BOOL)
    return TermValue(column)


def _parse_number(lexical: str, rank: int) -> tuple[Decimal | None, float] | None:
    try:
        if rank <= 2:
            import re

            pattern = r"^[+-]?[0-9]+$" if rank == 1 else r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$"
            if not re.match(pattern, lexical):
                return None
            dec = Decimal(lexical)
            return dec, float(dec)
        text = lexical.replace("INF", "Infinity")
        dbl = float(text)
        if lexical.strip() != lexical or (math.isinf(dbl) and "INF" not in lexical):
            return None
        return None, dbl
    except (InvalidOperation, ValueError):
        return None


class _ConstantNumber(TermValue):
    """A numeric constant: its term as written, and its number precomputed."""

    def __init__(self, column: Column, number: Numeric):
        super().__init__(column, v.NUM)
        self.number = number

    def numeric(self) -> Numeric:
        return self.number

    def ebv(self) -> Column:
        return (self.number.dbl != 0) & ~F.isnan(self.number.dbl)


