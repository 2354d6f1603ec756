"""Build the bundled NBA 2023-24 statistics database (SQLite) from the CSV files beside it.

``ensure_database(path)`` creates the file only when it is missing. It writes to a temporary
file in the same directory and renames it into place, so several pytest-xdist workers can
call it at the same time. The build is deterministic: same CSVs, same rows, same order.

Run ``python test_cases/data/build_nba_db.py [path]`` to build it by hand.
"""

from __future__ import annotations

import csv
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent
DEFAULT_PATH = DATA_DIR / "nba_stats.db"
PLAYERS_CSV = DATA_DIR / "players.csv"
STATS_CSV = DATA_DIR / "player_stats.csv"


def _models() -> tuple[Any, Any, Any]:
    """Declare the SQLAlchemy models (inside a function, so importing this module stays cheap).

    Columns are declared with ``mapped_column`` but without ``Mapped[...]`` annotations:
    annotations would be strings here and SQLAlchemy resolves those at module level only.
    """
    from sqlalchemy import Float, ForeignKey, Integer, String
    from sqlalchemy.orm import DeclarativeBase, mapped_column

    class Base(DeclarativeBase):
        pass

    class Player(Base):
        """One player and the team he finished the 2023-24 regular season with."""

        __tablename__ = "players"
        id = mapped_column(Integer, primary_key=True)
        name = mapped_column(String, nullable=False, unique=True)
        team = mapped_column(String, nullable=False)
        team_abbr = mapped_column(String(3), nullable=False, index=True)
        age = mapped_column(Integer)

    class PlayerStats(Base):
        """Regular-season totals; percentages are stored in percent (44.6, not 0.446)."""

        __tablename__ = "player_stats"
        id = mapped_column(Integer, primary_key=True)
        player_id = mapped_column(ForeignKey("players.id"), nullable=False)
        gp = mapped_column(Integer, nullable=False)  # games played
        w = mapped_column(Integer, nullable=False)  # wins in games played
        l = mapped_column(Integer, nullable=False)  # noqa: E741  (losses, the column name of the NBA data)
        min = mapped_column(Float, nullable=False)  # total minutes
        pts = mapped_column(Integer, nullable=False)
        fgm = mapped_column(Integer, nullable=False)
        fga = mapped_column(Integer, nullable=False)
        fg_pct = mapped_column(Float)
        three_pm = mapped_column(Integer, nullable=False)
        three_pa = mapped_column(Integer, nullable=False)
        three_pct = mapped_column(Float)  # NULL when three_pa = 0
        ftm = mapped_column(Integer, nullable=False)
        fta = mapped_column(Integer, nullable=False)
        ft_pct = mapped_column(Float)
        oreb = mapped_column(Integer, nullable=False)
        dreb = mapped_column(Integer, nullable=False)
        reb = mapped_column(Integer, nullable=False)
        ast = mapped_column(Integer, nullable=False)
        tov = mapped_column(Integer, nullable=False)
        stl = mapped_column(Integer, nullable=False)
        blk = mapped_column(Integer, nullable=False)
        pf = mapped_column(Integer, nullable=False)
        plus_minus = mapped_column(Integer, nullable=False)
        efg_pct = mapped_column(Float)
        ts_pct = mapped_column(Float)
        pie = mapped_column(Float)  # Player Impact Estimate, percent

    return Base, Player, PlayerStats


def _read_csv(path: Path, model: Any) -> list[dict[str, Any]]:
    """Read a CSV into dicts typed after the model's columns; an empty cell becomes NULL."""
    columns = {c.name: c.type.python_type for c in model.__table__.columns}
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = set(columns) - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path.name}: missing columns {sorted(missing)}")
        return [
            {name: (None if row[name] == "" else typ(row[name])) for name, typ in columns.items()}
            for row in reader
        ]


def build_database(path: str | Path) -> Path:
    """Build the database at ``path`` unconditionally (atomically replacing any file there)."""
    from sqlalchemy import create_engine, insert

    target = Path(path).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    base, player, player_stats = _models()
    players = _read_csv(PLAYERS_CSV, player)
    stats = _read_csv(STATS_CSV, player_stats)

    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        engine = create_engine(f"sqlite:///{tmp.as_posix()}")
        try:
            base.metadata.create_all(engine)
            with engine.begin() as conn:
                conn.execute(insert(player), players)
                conn.execute(insert(player_stats), stats)
        finally:
            engine.dispose()
        tmp.chmod(0o644)  # mkstemp creates 0600; the database is ordinary data
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def ensure_database(path: str | Path = DEFAULT_PATH) -> Path:
    """Return the path of the database, building it first if the file is missing or empty."""
    target = Path(path).resolve()
    if target.is_file() and target.stat().st_size > 0:
        return target
    return build_database(target)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: build (or keep) the database at the given path."""
    args = sys.argv[1:] if argv is None else argv
    target = ensure_database(args[0] if args else DEFAULT_PATH)
    print(target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
