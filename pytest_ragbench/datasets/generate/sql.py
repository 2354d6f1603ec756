"""SQL cases from a database's schema, their ground truth established by executing the SQL.

The schema is read through SQLAlchemy (tables, columns, keys); each table is seen as a
*view*: its own columns plus, through a foreign key, the label (a unique text column) and
group columns (text with few distinct values) of the table it refers to. Templates in the
bundled categories (aggregation, filter, join, null_handling, ranking, top_n) fill in
columns and values picked with the seed; each query runs on the database opened read-only
(:func:`pytest_ragbench.sql.engine.open_read_only`) and its result becomes
``ground_truth_data``. A candidate whose answer would be ambiguous (a tie for first place,
a tie at the cut of a top-n) or empty is rejected, and every kept case is run a second
time and compared as ``ragbench verify sql`` compares it.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from pytest_ragbench.cases.build import generated_id
from pytest_ragbench.cases.model import Table
from pytest_ragbench.datasets.generate.common import Accounting, Generated, GenerateError, draft
from pytest_ragbench.sql.engine import DatabaseError, open_read_only, run_query
from pytest_ragbench.sql.match import compare_tables

CATEGORIES = ("aggregation", "filter", "join", "null_handling", "ranking", "top_n")
MAX_ROWS = 12  # a longer result is no question a person would ask
# Common abbreviations in column names, written out in questions.
WORDS = {"pct": "percentage", "avg": "average", "num": "number", "qty": "quantity",
         "amt": "amount", "no": "number", "cnt": "count", "yr": "year"}


@dataclass(frozen=True)
class Column:
    """A numeric column of a view, qualified (``player_stats.pts``)."""

    table: str
    name: str
    nullable: bool

    @property
    def sql(self) -> str:
        """The qualified, quoted column."""
        return f'{_quote(self.table)}.{_quote(self.name)}'

    @property
    def words(self) -> str:
        """The column's name as words (``fg_pct``: ``fg percentage``)."""
        return humanize(self.name)


@dataclass(frozen=True)
class View:
    """A table, joined to the table its foreign key names when that one has a label."""

    entity: str  # what a row is, in words ("players")
    source: str  # the FROM clause
    tables: tuple[str, ...]
    label: Column | None  # a unique text column naming a row
    groups: tuple[Column, ...]  # text columns with few distinct values
    numbers: tuple[Column, ...]

    @property
    def joined(self) -> bool:
        """True when the view spans two tables."""
        return len(self.tables) > 1


@dataclass(frozen=True)
class Candidate:
    """A question with its SQL, before the SQL ran."""

    category: str
    template: str
    question: str
    sql: str
    tables: tuple[str, ...]
    order_matters: bool = False
    answer: Callable[[list[dict[str, Any]]], str] | None = None


def humanize(name: str) -> str:
    """``three_pct``: ``three percentage``; ``playerName``: ``player name``."""
    words = re.sub(r"([a-z])([A-Z])", r"\1 \2", name).replace("_", " ").lower().split()
    return " ".join(WORDS.get(w, w) for w in words)


def _quote(name: str) -> str:
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else '"' + name.replace('"', '""') + '"'


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def _alias(prefix: str, column: Column) -> str:
    return re.sub(r"\W+", "_", f"{prefix}_{column.name}").lower()


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


class Schema:
    """The views of a database and the queries that profile its columns."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.run = lambda sql: run_query(engine, sql)
        inspector = sa.inspect(engine)
        self.views: list[View] = []
        tables = inspector.get_table_names()
        info = {t: self._profile(t, inspector) for t in tables}
        for table in tables:
            label, groups, numbers = info[table]
            tables_used: tuple[str, ...] = (table,)
            source = _quote(table)
            entity = humanize(table)
            for key in inspector.get_foreign_keys(table):
                parent = key["referred_table"]
                if parent not in info or info[parent][0] is None:
                    continue
                plabel, pgroups, pnumbers = info[parent]
                pairs = zip(key["constrained_columns"], key["referred_columns"], strict=True)
                on = " AND ".join(f"{_quote(table)}.{_quote(c)} = {_quote(parent)}.{_quote(r)}"
                                  for c, r in pairs)
                source = f"{source} JOIN {_quote(parent)} ON {on}"
                tables_used = (table, parent)
                label, groups, numbers = plabel, pgroups, numbers + pnumbers
                entity = humanize(parent)
                break
            if numbers:
                self.views.append(View(entity, source, tables_used, label, groups, numbers))
        if not self.views:
            raise GenerateError("the database has no table with a numeric column to ask about")

    def _profile(self, table: str, inspector: Any
                 ) -> tuple[Column | None, tuple[Column, ...], tuple[Column, ...]]:
        """(label, groups, numbers) of one table, from its column types and values."""
        keys = set(inspector.get_pk_constraint(table).get("constrained_columns") or ())
        for fk in inspector.get_foreign_keys(table):
            keys |= set(fk["constrained_columns"])
        rows = self.run(f"SELECT COUNT(*) AS n FROM {_quote(table)}").rows[0][0]
        label = None
        groups: list[Column] = []
        numbers: list[Column] = []
        for spec in inspector.get_columns(table):
            name = spec["name"]
            column = Column(table, name, bool(spec.get("nullable", True)))
            python_type = _python_type(spec["type"])
            if name in keys or name.lower() == "id" or python_type is None:
                continue
            if python_type is str:
                distinct = self.run(f"SELECT COUNT(DISTINCT {column.sql}) AS d, "
                                    f"COUNT({column.sql}) AS c FROM {_quote(table)}").rows[0]
                if rows and distinct[0] == distinct[1] == rows and label is None:
                    label = column
                elif 2 <= distinct[0] <= min(50, rows // 2):
                    groups.append(column)
            else:
                numbers.append(column)
        return label, tuple(groups), tuple(numbers)


def _python_type(sql_type: Any) -> type | None:
    try:
        python_type = sql_type.python_type
    except NotImplementedError:
        return None
    if python_type is bool:
        return None
    if python_type in (int, float) or getattr(python_type, "__name__", "") == "Decimal":
        return float
    return str if python_type is str else None


class Templates:
    """Candidate questions of each category for one view, values drawn with ``rng``."""

    def __init__(self, schema: Schema, view: View, rng: random.Random) -> None:
        self.schema = schema
        self.view = view
        self.rng = rng

    def pick(self, options: list[str]) -> str:
        """One phrasing of several."""
        return self.rng.choice(options)

    def values(self, column: Column, limit: int = 200) -> list[Any]:
        """Distinct non-null values of ``column`` in the view."""
        table = self.schema.run(f"SELECT DISTINCT {column.sql} AS v FROM {self.view.source} "
                                f"WHERE {column.sql} IS NOT NULL ORDER BY 1 LIMIT {limit}")
        return [row[0] for row in table.rows]

    def candidates(self, category: str) -> Iterator[Candidate]:
        """Yield this view's candidates of ``category`` (each template once, fresh values)."""
        yield from getattr(self, category)()

    def _candidate(self, category: str, template: str, question: str, sql: str,
                   order_matters: bool = False) -> Candidate:
        return Candidate(category, template, question, sql, self.view.tables, order_matters)

    def aggregation(self) -> Iterator[Candidate]:
        """Average, total, maximum or minimum of a column, over all rows or one group."""
        view = self.view
        column = self.rng.choice(view.numbers)
        function, word = self.rng.choice([("AVG", "average"), ("SUM", "total"),
                                          ("MAX", "maximum"), ("MIN", "minimum")])
        alias = _alias(function.lower(), column)
        question = self.pick([f"What is the {word} {column.words} across all {view.entity}?",
                              f"Across every one of the {view.entity}, what is the {word} "
                              f"{column.words}?",
                              f"Give the {word} {column.words} of the {view.entity}."])
        yield self._candidate("aggregation", f"{function.lower()}_all", question,
                              f"SELECT ROUND({function}({column.sql}), 2) AS {alias} "
                              f"FROM {view.source}")
        groups = [g for g in view.groups if g.table == column.table]
        if groups:
            group = self.rng.choice(groups)
            value = self.rng.choice(self.values(group))
            question = self.pick([
                f"What is the {word} {column.words} of the {view.entity} whose "
                f"{group.words} is {value}?",
                f"For {view.entity} with {group.words} {value}, what is the {word} "
                f"{column.words}?"])
            yield self._candidate("aggregation", f"{function.lower()}_group", question,
                                  f"SELECT ROUND({function}({column.sql}), 2) AS {alias} "
                                  f"FROM {view.source} WHERE {group.sql} = {_literal(value)}")
        question = self.pick([f"How many {view.entity} with a recorded {column.words} are "
                              "there?",
                              f"Count the {view.entity} that have a {column.words} value."])
        yield self._candidate("aggregation", "count", question,
                              f"SELECT COUNT({column.sql}) AS n_{_alias('with', column)} "
                              f"FROM {view.source}")

    def filter(self) -> Iterator[Candidate]:
        """Rows above a threshold: how many, and (when few) which."""
        view = self.view
        column = self.rng.choice(view.numbers)
        values = self.values(column)
        if len(values) < 4:
            return
        threshold = values[self.rng.randrange(len(values) // 4, 3 * len(values) // 4)]
        question = self.pick([
            f"How many {view.entity} have a {column.words} above {_shown(threshold)}?",
            f"Count the {view.entity} whose {column.words} is greater than "
            f"{_shown(threshold)}."])
        yield self._candidate("filter", "count_above", question,
                              f"SELECT COUNT(*) AS n FROM {view.source} "
                              f"WHERE {column.sql} > {_literal(threshold)}")
        if view.label is not None:
            cut = values[-self.rng.randint(2, min(6, len(values)))]
            question = self.pick([
                f"Which {view.entity} have a {column.words} of at least {_shown(cut)}?",
                f"List the {view.entity} whose {column.words} is {_shown(cut)} or more."])
            yield self._candidate("filter", "list_at_least", question,
                                  f"SELECT {view.label.sql} AS {view.label.name}, {column.sql} "
                                  f"AS {column.name} FROM {view.source} "
                                  f"WHERE {column.sql} >= {_literal(cut)}")
        groups = [g for g in view.groups if g.table != column.table or not view.joined]
        if groups:
            group = self.rng.choice(groups)
            value = self.rng.choice(self.values(group))
            question = self.pick([
                f"How many {view.entity} with {group.words} {value} have a {column.words} "
                f"above {_shown(threshold)}?",
                f"Among the {view.entity} whose {group.words} is {value}, how many have a "
                f"{column.words} greater than {_shown(threshold)}?"])
            yield self._candidate("filter", "count_group_above", question,
                                  f"SELECT COUNT(*) AS n FROM {view.source} "
                                  f"WHERE {group.sql} = {_literal(value)} "
                                  f"AND {column.sql} > {_literal(threshold)}")

    def join(self) -> Iterator[Candidate]:
        """Values that need both tables: one named row's column, a group's total."""
        view = self.view
        if not view.joined:
            return
        own = [c for c in view.numbers if c.table == view.tables[0]]
        if view.label is not None and own:
            column = self.rng.choice(own)
            name = self.rng.choice(self.values(view.label))
            question = self.pick([f"What is the {column.words} of {name}?",
                                  f"How much {column.words} does {name} have?",
                                  f"Look up {name}'s {column.words}."])
            yield self._candidate("join", "lookup", question,
                                  f"SELECT {view.label.sql} AS {view.label.name}, {column.sql} "
                                  f"AS {column.name} FROM {view.source} "
                                  f"WHERE {view.label.sql} = {_literal(name)}")
        if view.groups and own:
            column = self.rng.choice(own)
            group = self.rng.choice(view.groups)
            value = self.rng.choice(self.values(group))
            question = self.pick([
                f"What is the total {column.words} of the {view.entity} whose "
                f"{group.words} is {value}?",
                f"Add up the {column.words} of every one of the {view.entity} with "
                f"{group.words} {value}."])
            yield self._candidate("join", "group_total", question,
                                  f"SELECT SUM({column.sql}) AS {_alias('total', column)} "
                                  f"FROM {view.source} WHERE {group.sql} = {_literal(value)}")

    def null_handling(self) -> Iterator[Candidate]:
        """Missing values: how many rows lack one, and averages over the recorded ones."""
        view = self.view
        nullable = [c for c in view.numbers if c.nullable]
        if not nullable:
            return
        missing = [c for c in nullable if self.schema.run(
            f"SELECT COUNT(*) - COUNT({c.sql}) AS m FROM {view.source}").rows[0][0]]
        # mostly a column that lacks values (answers of 0 teach little), sometimes any
        column = self.rng.choice(missing if missing and self.rng.random() < 0.7 else nullable)
        question = self.pick([f"How many {view.entity} have no recorded {column.words}?",
                              f"For how many {view.entity} is the {column.words} missing?"])
        yield self._candidate("null_handling", "count_missing", question,
                              f"SELECT COUNT(*) AS {_alias('missing', column)} "
                              f"FROM {view.source} WHERE {column.sql} IS NULL")
        question = self.pick([
            f"Counting only {view.entity} with a recorded {column.words}, what is its "
            "average?",
            f"What is the average {column.words}, ignoring {view.entity} without one?"])
        yield self._candidate("null_handling", "avg_recorded", question,
                              f"SELECT ROUND(AVG({column.sql}), 2) AS {_alias('avg', column)} "
                              f"FROM {view.source} WHERE {column.sql} IS NOT NULL")
        question = self.pick([
            f"Treating a missing {column.words} as 0, what is the average {column.words} of "
            f"the {view.entity}?",
            f"If {view.entity} without a {column.words} count as 0, what is the average?"])
        yield self._candidate("null_handling", "avg_missing_as_zero", question,
                              f"SELECT ROUND(AVG(COALESCE({column.sql}, 0)), 2) AS "
                              f"{_alias('avg', column)} FROM {view.source}")
        question = self.pick([
            f"What share of the {view.entity} (in percent) have a recorded {column.words}?",
            f"In percent, how many of the {view.entity} have a {column.words} on record?"])
        yield self._candidate("null_handling", "share_recorded", question,
                              f"SELECT ROUND(100.0 * COUNT({column.sql}) / COUNT(*), 2) AS "
                              f"{_alias('pct_with', column)} FROM {view.source}")
        if view.groups:
            group = self.rng.choice(view.groups)
            question = self.pick([
                f"Which {group.words} values have {view.entity} with no recorded "
                f"{column.words}, and how many each?",
                f"Per {group.words}, how many {view.entity} lack a {column.words}? "
                "(only groups with at least one)"])
            yield self._candidate("null_handling", "missing_by_group", question,
                                  f"SELECT {group.sql} AS {group.name}, COUNT(*) AS n "
                                  f"FROM {view.source} WHERE {column.sql} IS NULL "
                                  f"GROUP BY {group.sql}")

    def ranking(self) -> Iterator[Candidate]:
        """Who has the highest or lowest value; which group has the highest average."""
        view = self.view
        column = self.rng.choice(view.numbers)
        if view.label is not None:
            order, word = self.rng.choice([("DESC", "highest"), ("ASC", "lowest")])
            question = self.pick([f"Which of the {view.entity} has the {word} {column.words}?",
                                  f"Who has the {word} {column.words} among the "
                                  f"{view.entity}?"])
            yield self._candidate("ranking", f"{word}_one", question,
                                  f"SELECT {view.label.sql} AS {view.label.name}, {column.sql} "
                                  f"AS {column.name} FROM {view.source} WHERE {column.sql} "
                                  f"IS NOT NULL ORDER BY {column.sql} {order} LIMIT 1")
        if view.groups:
            group = self.rng.choice(view.groups)
            alias = _alias("avg", column)
            question = self.pick([
                f"Which {group.words} has the highest average {column.words}?",
                f"Grouping the {view.entity} by {group.words}, which group's average "
                f"{column.words} is highest?"])
            yield self._candidate("ranking", "group_highest_avg", question,
                                  f"SELECT {group.sql} AS {group.name}, "
                                  f"ROUND(AVG({column.sql}), 2) AS {alias} FROM {view.source} "
                                  f"GROUP BY {group.sql} HAVING COUNT({column.sql}) > 0 "
                                  f"ORDER BY AVG({column.sql}) DESC LIMIT 1")

    def top_n(self) -> Iterator[Candidate]:
        """The first n rows by a column, in order."""
        view = self.view
        if view.label is None:
            return
        column = self.rng.choice(view.numbers)
        size = self.rng.randint(3, 5)
        order, word = self.rng.choice([("DESC", "highest"), ("ASC", "lowest")])
        question = self.pick([
            f"List the {size} {view.entity} with the {word} {column.words}, in order.",
            f"What are the top {size} {view.entity} by {column.words} ({word} first)?",
            f"Name the {size} {view.entity} whose {column.words} is {word}, ranked."])
        yield self._candidate("top_n", f"top_{word}", question,
                              f"SELECT {view.label.sql} AS {view.label.name}, {column.sql} "
                              f"AS {column.name} FROM {view.source} WHERE {column.sql} IS NOT "
                              f"NULL ORDER BY {column.sql} {order} LIMIT {size}",
                              order_matters=True)


def _ambiguity(candidate: Candidate, schema: Schema) -> str | None:
    """Why a ranked answer is not unique (a tie at the cut), or None."""
    match = re.search(r"ORDER BY (.+) (DESC|ASC) LIMIT (\d+)$", candidate.sql)
    if match is None:
        return None
    limit = int(match.group(3))
    wider = candidate.sql[:match.start(3)] + str(limit + 1)
    table = schema.run(wider)
    key = [row[-1] for row in table.rows]
    if candidate.template == "group_highest_avg":  # the rounded average is shown, compare raw
        raw = schema.run(re.sub(r"SELECT (.+?), ROUND\((AVG\(.+?\)), 2\) AS (\w+) FROM",
                                r"SELECT \1, \2 AS \3 FROM", wider))
        key = [row[-1] for row in raw.rows]
    if len(key) > limit and key[limit - 1] == key[limit]:
        return "tie at the cut"
    if candidate.order_matters and len(set(key[:limit])) < len(key[:limit]):
        return "tie within the order"
    return None


def _answer(question: str, records: list[dict[str, Any]]) -> str:
    if len(records) == 1 and len(records[0]) == 1:
        return f"{_shown(next(iter(records[0].values())))}"
    return "; ".join(", ".join(f"{k}: {_shown(v)}" for k, v in row.items()) for row in records)


def generate_sql(url: str, n: int, seed: int, *, timeout_s: float = 30.0,
                 categories: tuple[str, ...] = CATEGORIES) -> Generated:
    """``n`` sql cases (spread evenly over ``categories``) from the database at ``url``."""
    accounting = Accounting()
    engine = open_read_only(url, timeout_s=timeout_s)
    shown_url = sa.make_url(url).render_as_string(hide_password=True)
    try:
        schema = Schema(engine)
        rng = random.Random(seed)
        quotas = {c: n // len(categories) + (i < n % len(categories))
                  for i, c in enumerate(categories)}
        kept: dict[str, list[dict[str, Any]]] = {c: [] for c in categories}
        seen: set[str] = set()
        for category in categories:
            rounds = 0
            while len(kept[category]) < quotas[category] and rounds < 40 * max(1, n):
                rounds += 1
                view = rng.choice(schema.views)
                for candidate in Templates(schema, view, rng).candidates(category):
                    if len(kept[category]) >= quotas[category]:
                        break
                    if candidate.sql in seen:
                        continue
                    seen.add(candidate.sql)
                    case = _establish(candidate, schema, accounting)
                    if case is not None:
                        kept[category].append(draft(case, {
                            "generator": "sql", "template": candidate.template,
                            "source": shown_url, "tables": list(candidate.tables),
                            "seed": seed, "model": None}))
        cases = [case for category in categories for case in kept[category]]
        for case in cases:  # a second, independent run of each query
            accounting.exact += 1
            accounting.verified += recheck(engine, case)
        for category in categories:
            if len(kept[category]) < quotas[category]:
                accounting.reject(f"sql/{category}",
                                  f"quota unmet ({len(kept[category])}/{quotas[category]})")
    finally:
        engine.dispose()
    return Generated(cases, accounting.finish())


def recheck(engine: Any, case: dict[str, Any]) -> bool:
    """Whether the case's SQL, run again, gives its ``ground_truth_data`` (as verify compares)."""
    actual = run_query(engine, case["expected_sql"])
    expected = Table.from_records(case["ground_truth_data"])
    return compare_tables(expected, actual, order_matters=case.get("order_matters", False)).ok


def _establish(candidate: Candidate, schema: Schema, accounting: Accounting
               ) -> dict[str, Any] | None:
    """Run the candidate's SQL; the case with its ground truth, or None (counted)."""
    kind = f"sql/{candidate.category}"
    try:
        table = schema.run(candidate.sql)
    except DatabaseError as exc:
        accounting.reject(kind, f"query failed: {type(exc).__name__}")
        return None
    records = table.as_records()
    if not records or all(v is None for row in records for v in row.values()):
        accounting.reject(kind, "empty result")
        return None
    if len(records) > MAX_ROWS:
        accounting.reject(kind, "too many rows")
        return None
    if len(set(table.columns)) < len(table.columns):
        accounting.reject(kind, "duplicate column names")
        return None
    problem = _ambiguity(candidate, schema)
    if problem is not None:
        accounting.reject(kind, problem)
        return None
    accounting.keep(kind)
    data: Any = records[0] if len(records) == 1 else records
    case: dict[str, Any] = {"kind": "sql", "category": candidate.category,
                            "question": candidate.question,
                            "expected_sql": candidate.sql, "ground_truth_data": data,
                            "ground_truth_answer": _answer(candidate.question, records)}
    if candidate.order_matters:
        case["order_matters"] = True
    return {"id": generated_id(candidate.question, case), **case}
