"""Generate the small BEIR dataset ``nba_mini`` from the bundled NBA 2023-24 data files.

Documents are short profiles written from templates: four per player with statistics
(scoring, playmaking, defense and rebounding, efficiency and impact), one availability note
for a player without statistics, one per team and a set of hand-written concept notes.
Template choices are drawn from ``random.Random`` seeded with the document id, so the output
is identical on every run. Queries and graded relevance judgments (2 = answers the query,
1 = related, 0 = judged not relevant) are written by hand below.

Run ``python test_cases/beir/make_nba_mini.py`` to rewrite ``nba_mini/``.
"""

from __future__ import annotations

import csv
import json
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"
OUT = HERE / "nba_mini"
SEED = "nba_mini-v1"

# Team records of the 2023-24 regular season (the database stores players only).
TEAM_RECORDS = {
    "ATL": (36, 46), "BOS": (64, 18), "BKN": (32, 50), "CHA": (21, 61), "CHI": (39, 43),
    "CLE": (48, 34), "DAL": (50, 32), "DEN": (57, 25), "DET": (14, 68), "GSW": (46, 36),
    "HOU": (41, 41), "IND": (47, 35), "LAC": (51, 31), "LAL": (47, 35), "MEM": (27, 55),
    "MIA": (46, 36), "MIL": (49, 33), "MIN": (56, 26), "NOP": (49, 33), "NYK": (50, 32),
    "OKC": (57, 25), "ORL": (47, 35), "PHI": (47, 35), "PHX": (49, 33), "POR": (21, 61),
    "SAC": (46, 36), "SAS": (22, 60), "TOR": (25, 57), "UTA": (31, 51), "WAS": (15, 67),
}
ROOKIES = {"Victor Wembanyama", "Chet Holmgren", "Dereck Lively II"}
PLAY_IN = {
    "LAL": "won its play-in game at New Orleans to take the seventh seed in the West",
    "NOP": "lost its first play-in game to the Lakers, then beat Sacramento at home for the "
           "eighth seed",
    "SAC": "beat Golden State in the nine-versus-ten play-in game but lost at New Orleans and "
           "missed the playoffs",
    "GSW": "lost the nine-versus-ten play-in game at Sacramento and missed the playoffs",
    "PHI": "beat Miami in the seven-versus-eight play-in game to earn the seventh seed in the East",
    "MIA": "lost at Philadelphia in the play-in, then beat Chicago for the eighth seed",
    "CHI": "beat Atlanta in the play-in but lost the decisive game at Miami",
    "ATL": "lost the ten-seed play-in game at Chicago",
}
ABSENCES = {
    "Lonzo Ball": "did not appear in a single game: he was still recovering from a knee "
                  "cartilage transplant after the injury he suffered in January 2022",
}

CONCEPTS = {
    "concept-true-shooting": (
        "True shooting percentage",
        "True shooting percentage (TS%) measures how many points a player scores per shooting "
        "possession: PTS divided by 2 x (FGA + 0.44 x FTA). Unlike field goal percentage it "
        "credits three-pointers and free throws, which makes it the most complete single number"
        " for scoring efficiency. Around 58 percent is average; above 62 percent is excellent "
        "for a high-volume scorer."),
    "concept-effective-fg": (
        "Effective field goal percentage",
        "Effective field goal percentage (eFG%) adjusts field goal percentage for the extra "
        "point of a three: (FGM + 0.5 x 3PM) / FGA. A player hitting 40 percent from deep has "
        "the same eFG% as one making 60 percent of his twos. It ignores free throws, which true"
        " shooting includes."),
    "concept-pie": (
        "Player Impact Estimate (PIE)",
        "Player Impact Estimate is the NBA's box-score measure of the share of positive events "
        "in a game a player is responsible for: points, rebounds, assists, steals and blocks "
        "minus missed shots, turnovers and fouls, divided by the same total for everyone in the"
        " game. League average is about 10; an MVP-calibre season is near 20."),
    "concept-plus-minus": (
        "Plus-minus",
        "Plus-minus is the scoring margin of a player's team while he is on the floor, summed "
        "over the season. It is easy to read but depends heavily on teammates, opponents and "
        "team quality, so it is best compared within one team. Adjusted models such as RAPM try"
        " to separate the individual from the lineup."),
    "concept-usage-rate": (
        "Usage rate",
        "Usage rate is the percentage of team possessions a player finishes with a shot, a trip"
        " to the free-throw line or a turnover while he is on the court. Primary options often "
        "exceed 30 percent; role players sit near 15. It measures responsibility, not quality."),
    "concept-pace": (
        "Pace and possessions",
        "Pace counts possessions per 48 minutes. Fast teams get more shots and score more "
        "points per game without necessarily being more efficient, so analysts compare teams "
        "with offensive and defensive rating, which are points per 100 possessions."),
    "concept-65-game-rule": (
        "The 65-game rule",
        "Since 2023-24 a player needs at least 65 games, with 20 or more minutes in each (two "
        "games of 15 to 20 minutes may count), to be eligible for MVP, Defensive Player of the "
        "Year, All-NBA and other major awards. The rule targets load management; critics say it"
        " punishes injured players."),
    "concept-play-in": (
        "Play-in tournament",
        "The play-in decides the seventh and eighth playoff seeds of each conference among the "
        "teams placed seventh to tenth. Seven hosts eight for the seventh seed, nine hosts ten "
        "with the loser eliminated, and the loser of seven-eight hosts the winner of nine-ten "
        "for the last spot."),
    "concept-three-point-percentage": (
        "Three-point percentage and missing values",
        "Three-point percentage is threes made divided by threes attempted. For a player who "
        "never attempts a three the ratio is undefined, so statistical databases store it as "
        "NULL rather than zero; averaging such values must skip them instead of counting them "
        "as 0 percent."),
    "concept-double-double": (
        "Double-doubles and triple-doubles",
        "A double-double is a game with 10 or more in two of points, rebounds, assists, steals "
        "and blocks; a triple-double needs three. Passing big men who rebound, like Nikola "
        "Jokic and Domantas Sabonis, collect them at a record pace."),
    "concept-defensive-player-award": (
        "Defensive Player of the Year",
        "The Defensive Player of the Year award is chosen by a media panel. Voters weigh rim "
        "protection, versatility and the quality of the team's defense, not only blocks and "
        "steals. Rudy Gobert won it for the fourth time in 2024."),
    "concept-assist-to-turnover": (
        "Assist-to-turnover ratio",
        "The assist-to-turnover ratio divides assists by turnovers. Careful point guards reach "
        "four or more assists per turnover; high-usage creators who handle the ball on every "
        "possession usually sit between two and three."),
    "concept-rebounding": (
        "Offensive and defensive rebounds",
        "An offensive rebound recovers a teammate's miss and extends the possession; a "
        "defensive rebound ends the opponent's possession. Offensive rebounds per 36 minutes "
        "identify specialists who create second chances even in limited minutes."),
    "concept-rookie-of-the-year": (
        "Rookie of the Year",
        "Rookie of the Year goes to the best first-year player. A player who missed his first "
        "season through injury is still a rookie when he first plays. The 65-game rule does not"
        " apply to the award."),
}

# (query id, text, {doc id: grade}) -- grades 2 answer the query, 1 are related, 0 judged off-topic
QUERIES: list[tuple[str, str, dict[str, int]]] = [
    ("q01", "rookie shot blocker who led the league in blocks",
     {"victor-wembanyama-defense": 2, "chet-holmgren-defense": 1, "team-sas": 1,
      "concept-rookie-of-the-year": 0}),
    ("q02", "best rebounder per game this season",
     {"domantas-sabonis-defense": 2, "rudy-gobert-defense": 1, "anthony-davis-defense": 1,
      "nikola-jokic-defense": 1, "concept-rebounding": 0}),
    ("q03", "who had the most assists",
     {"tyrese-haliburton-playmaking": 2, "nikola-jokic-playmaking": 1,
      "luka-doncic-playmaking": 1, "trae-young-playmaking": 1}),
    ("q04", "scoring champion highest points per game",
     {"luka-doncic-scoring": 2, "joel-embiid-scoring": 1, "giannis-antetokounmpo-scoring": 1,
      "shai-gilgeous-alexander-scoring": 1}),
    ("q05", "centers who never attempt three pointers",
     {"rudy-gobert-scoring": 2, "jarrett-allen-scoring": 2, "clint-capela-scoring": 2,
      "walker-kessler-scoring": 2, "mitchell-robinson-scoring": 2, "daniel-gafford-scoring": 2,
      "ivica-zubac-scoring": 2, "dereck-lively-ii-scoring": 2,
      "concept-three-point-percentage": 1}),
    ("q06", "what is true shooting percentage",
     {"concept-true-shooting": 2, "concept-effective-fg": 1}),
    ("q07", "player impact estimate definition",
     {"concept-pie": 2, "concept-plus-minus": 1}),
    ("q08", "Boston Celtics team overview",
     {"team-bos": 2, "jayson-tatum-scoring": 1, "jaylen-brown-scoring": 1}),
    ("q09", "most efficient high volume scorer true shooting",
     {"domantas-sabonis-impact": 2, "nikola-jokic-impact": 2, "giannis-antetokounmpo-impact": 1,
      "shai-gilgeous-alexander-impact": 1, "concept-true-shooting": 1}),
    ("q10", "Lonzo Ball knee injury did not play",
     {"lonzo-ball-availability": 2, "team-chi": 1}),
    ("q11", "Stephen Curry three point shooting",
     {"stephen-curry-scoring": 2, "stephen-curry-impact": 1, "team-gsw": 1,
      "klay-thompson-scoring": 0}),
    ("q12", "steals leader",
     {"shai-gilgeous-alexander-defense": 2, "de-aaron-fox-defense": 2,
      "donovan-mitchell-defense": 1, "lamelo-ball-defense": 1}),
    ("q13", "oldest player still productive at his age",
     {"lebron-james-scoring": 2, "lebron-james-playmaking": 1, "chris-paul-playmaking": 1,
      "al-horford-scoring": 1, "kevin-durant-scoring": 1, "stephen-curry-scoring": 1}),
    ("q14", "youngest player rookie center Dallas",
     {"dereck-lively-ii-scoring": 2, "dereck-lively-ii-impact": 1, "team-dal": 1}),
    ("q15", "worst plus-minus on a losing team",
     {"kyle-kuzma-impact": 2, "jaren-jackson-jr-impact": 1, "cade-cunningham-impact": 1,
      "team-was": 1, "concept-plus-minus": 1}),
    ("q16", "highest PIE player impact",
     {"joel-embiid-impact": 2, "nikola-jokic-impact": 2, "giannis-antetokounmpo-impact": 1,
      "luka-doncic-impact": 1, "shai-gilgeous-alexander-impact": 1, "concept-pie": 1}),
    ("q17", "who gets to the free throw line the most",
     {"joel-embiid-scoring": 2, "giannis-antetokounmpo-scoring": 2,
      "shai-gilgeous-alexander-scoring": 1, "luka-doncic-scoring": 1,
      "demar-derozan-scoring": 1}),
    ("q18", "Denver Nuggets roster",
     {"team-den": 2, "nikola-jokic-scoring": 1, "jamal-murray-scoring": 1}),
    ("q19", "turnover prone ball handler",
     {"luka-doncic-playmaking": 2, "trae-young-playmaking": 2,
      "victor-wembanyama-playmaking": 1, "concept-assist-to-turnover": 1}),
    ("q20", "best assist to turnover ratio point guard",
     {"fred-vanvleet-playmaking": 2, "tyrese-haliburton-playmaking": 2,
      "chris-paul-playmaking": 2, "concept-assist-to-turnover": 1}),
    ("q21", "played only a few games because of injury or suspension",
     {"ja-morant-scoring": 2, "lamelo-ball-scoring": 2, "zach-lavine-scoring": 2,
      "mitchell-robinson-scoring": 2, "joel-embiid-scoring": 1}),
    ("q22", "offensive rebounding specialist",
     {"mitchell-robinson-defense": 2, "clint-capela-defense": 2,
      "dereck-lively-ii-defense": 1, "daniel-gafford-defense": 1, "concept-rebounding": 1}),
    ("q23", "65 game rule award eligibility",
     {"concept-65-game-rule": 2, "joel-embiid-scoring": 1}),
    ("q24", "Indiana Pacers fast pace offense",
     {"team-ind": 2, "concept-pace": 1, "tyrese-haliburton-playmaking": 1}),
    ("q25", "Oklahoma City young team top seed",
     {"team-okc": 2, "shai-gilgeous-alexander-scoring": 1, "chet-holmgren-defense": 1,
      "jalen-williams-scoring": 1}),
    ("q26", "three point specialist with a high percentage",
     {"karl-anthony-towns-scoring": 2, "jrue-holiday-scoring": 2, "bradley-beal-scoring": 2,
      "kawhi-leonard-scoring": 1, "jamal-murray-scoring": 1, "paul-george-scoring": 1,
      "jalen-williams-scoring": 1}),
    ("q27", "passing big man double-double center",
     {"nikola-jokic-playmaking": 2, "domantas-sabonis-playmaking": 2,
      "giannis-antetokounmpo-playmaking": 1, "concept-double-double": 1,
      "bam-adebayo-playmaking": 0}),
    ("q28", "what does plus-minus measure",
     {"concept-plus-minus": 2, "concept-pie": 1}),
    ("q29", "Memphis Grizzlies injuries",
     {"team-mem": 2, "ja-morant-scoring": 1, "desmond-bane-scoring": 1}),
    ("q30", "play-in tournament format",
     {"concept-play-in": 2, "team-nop": 1, "team-mia": 1, "team-lal": 1,
      "concept-65-game-rule": 0}),
    ("q31", "guard who blocks a lot of shots",
     {"derrick-white-defense": 2, "shai-gilgeous-alexander-defense": 1}),
    ("q32", "Milwaukee Bucks star forward free throw struggles",
     {"giannis-antetokounmpo-scoring": 2, "team-mil": 1, "damian-lillard-scoring": 0}),
    ("q33", "effective field goal percentage formula",
     {"concept-effective-fg": 2, "concept-true-shooting": 1}),
    ("q34", "Los Angeles Lakers players",
     {"team-lal": 2, "lebron-james-scoring": 1, "anthony-davis-scoring": 1}),
]


@dataclass(frozen=True)
class Line:
    """One player's season line with the per-game values the templates use."""

    name: str
    team: str
    abbr: str
    age: int
    stats: dict[str, float] | None

    def pg(self, key: str) -> float:
        """Per-game average of a counting stat, rounded to one decimal."""
        assert self.stats is not None
        return round(self.stats[key] / self.stats["gp"], 1)


def slug(text: str) -> str:
    """Lower-case, ASCII-only id fragment: "De'Aaron Fox" -> "de-aaron-fox"."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def load_lines() -> list[Line]:
    """Read players.csv and player_stats.csv (an empty cell is a missing value)."""
    with (DATA / "player_stats.csv").open(newline="", encoding="utf-8") as fh:
        stats = {
            row["player_id"]: {k: float(v) for k, v in row.items() if v != "" and k != "id"}
            for row in csv.DictReader(fh)
        }
    with (DATA / "players.csv").open(newline="", encoding="utf-8") as fh:
        return [
            Line(row["name"], row["team"], row["team_abbr"], int(row["age"]), stats.get(row["id"]))
            for row in csv.DictReader(fh)
        ]


def pick(rng: random.Random, *options: str) -> str:
    """Choose one phrasing."""
    return rng.choice(options)


def leaders(lines: list[Line]) -> dict[str, str]:
    """Name of the dataset leader in a few headline categories."""
    played = [ln for ln in lines if ln.stats]
    return {
        "ppg": max(played, key=lambda ln: ln.stats["pts"] / ln.stats["gp"]).name,  # type: ignore[index]
        "title": max((ln for ln in played if ln.stats["gp"] >= 58),  # type: ignore[index]
                     key=lambda ln: ln.stats["pts"] / ln.stats["gp"]).name,  # type: ignore[index]
        "pts": max(played, key=lambda ln: ln.stats["pts"]).name,  # type: ignore[index]
        "ast": max(played, key=lambda ln: ln.stats["ast"]).name,  # type: ignore[index]
        "blk": max(played, key=lambda ln: ln.stats["blk"]).name,  # type: ignore[index]
        "stl": max(played, key=lambda ln: ln.stats["stl"]).name,  # type: ignore[index]
        "rpg": max(played, key=lambda ln: ln.stats["reb"] / ln.stats["gp"]).name,  # type: ignore[index]
        "three_pm": max(played, key=lambda ln: ln.stats["three_pm"]).name,  # type: ignore[index]
        "tov": max(played, key=lambda ln: ln.stats["tov"]).name,  # type: ignore[index]
        "age": max(lines, key=lambda ln: ln.age).name,
        "young": min(lines, key=lambda ln: ln.age).name,
    }


def scoring_doc(ln: Line, lead: dict[str, str], rng: random.Random) -> str:
    s = ln.stats
    assert s is not None
    ppg = ln.pg("pts")
    tier = (
        "one of the league's elite scorers" if ppg >= 30 else
        "a true first option" if ppg >= 25 else
        "a dependable 20-point scorer" if ppg >= 20 else
        "a secondary scoring option" if ppg >= 14 else
        "a low-usage finisher"
    )
    parts = [pick(rng,
                  f"{ln.name} ({ln.team}) averaged {ppg} points per game in {int(s['gp'])} games, "
                  f"{int(s['pts'])} points in all, as {tier}.",
                  f"In {int(s['gp'])} games for the {ln.team}, {ln.name} scored {int(s['pts'])} "
                  f"points ({ppg} per game), {tier}.",
                  f"{ln.name} was {tier} for the {ln.team}: {ppg} points a night and "
                  f"{int(s['pts'])} total across {int(s['gp'])} appearances.")]
    if ln.name == lead["ppg"]:
        parts.append("No player in the dataset had a higher scoring average.")
        if ln.name != lead["title"]:
            parts.append(f"With only {int(s['gp'])} games he did not qualify for the "
                         "scoring title.")
    if ln.name == lead["title"]:
        parts.append("He won the scoring title as the top qualified scorer (58 or more games).")
    if ln.name == lead["pts"]:
        parts.append("He scored more total points than anyone else in the dataset.")
    parts.append(pick(rng,
                      f"He shot {s['fg_pct']} percent from the field.",
                      f"His field goal percentage was {s['fg_pct']}.",
                      f"He converted {s['fg_pct']}% of his {int(s['fga'])} field goal attempts."))
    if s["three_pa"] == 0:
        parts.append(pick(rng,
                          "He did not attempt a single three-pointer all season, so his "
                          "three-point percentage is undefined; he scores almost entirely around "
                          "the basket.",
                          "A pure interior player, he never attempted a three, which leaves his "
                          "three-point percentage blank."))
    else:
        line = (f"From deep he made {int(s['three_pm'])} of {int(s['three_pa'])} attempts "
                f"({s['three_pct']}%)")
        if s["three_pct"] >= 42 and s["three_pa"] >= 200:
            line += ", among the most accurate marks of any regular shooter"
        if ln.name == lead["three_pm"]:
            line += ", the most made threes of any player"
        parts.append(line + ".")
    fta_pg = ln.pg("fta")
    ft = f"At the line he made {int(s['ftm'])} of {int(s['fta'])} free throws ({s['ft_pct']}%)"
    if fta_pg >= 8:
        ft += f", drawing fouls constantly with {fta_pg} attempts per game"
    if s["ft_pct"] < 70:
        ft += "; free-throw shooting remains a clear weakness"
    parts.append(ft + ".")
    if s["gp"] < 40:
        parts.append(pick(rng,
                          f"Availability was the issue: injuries or absences limited him to "
                          f"{int(s['gp'])} games.",
                          f"He appeared in only {int(s['gp'])} games because of injuries or "
                          f"other absences, far short of a full season."))
    if ln.age >= 35:
        parts.append(f"He did this at age {ln.age}, late in a long career.")
    if ln.name == lead["age"]:
        parts.append("He was the oldest player in the dataset.")
    if ln.name == lead["young"]:
        parts.append("He was the youngest player in the dataset.")
    if ln.name in ROOKIES:
        parts.append("It was his rookie season.")
    return " ".join(parts)


def playmaking_doc(ln: Line, lead: dict[str, str], rng: random.Random) -> str:
    s = ln.stats
    assert s is not None
    apg, tpg = ln.pg("ast"), ln.pg("tov")
    ratio = round(s["ast"] / s["tov"], 2) if s["tov"] else None
    role = (
        "a primary playmaker" if apg >= 8.5 else
        "a capable creator" if apg >= 5.5 else
        "a connector rather than a creator" if apg >= 3 else
        "rarely asked to create for others"
    )
    parts = [pick(rng,
                  f"{ln.name} of the {ln.team} handed out {int(s['ast'])} assists "
                  f"({apg} per game), {role}.",
                  f"As a passer, {ln.name} was {role}: {apg} assists per game and {int(s['ast'])} "
                  f"for the season with the {ln.team}.",
                  f"Playmaking profile: {ln.name} ({ln.abbr}) averaged {apg} assists, "
                  f"{int(s['ast'])} in total, and was {role}.")]
    if ln.name == lead["ast"]:
        parts.append("Nobody in the dataset recorded more assists.")
    parts.append(f"He committed {int(s['tov'])} turnovers ({tpg} per game)"
                 + (f", an assist-to-turnover ratio of {ratio}" if ratio else "") + ".")
    if ratio and ratio >= 4:
        parts.append(pick(rng, "That is elite ball security for a lead guard.",
                          "Few players protect the ball this well while running an offense."))
    if tpg >= 3.5:
        parts.append(pick(rng, "The turnovers are the price of an enormous on-ball workload.",
                          "He was turnover-prone, which comes with handling the ball on nearly "
                          "every possession."))
    if ln.name == lead["tov"]:
        parts.append("His turnover total was the highest in the dataset.")
    if ln.pg("reb") >= 10 and apg >= 6:
        parts.append(pick(rng,
                          "A passing big man, he ran the offense from the post and the elbows and "
                          "piled up double-doubles.",
                          "Few centers pass like this: he was the hub of his team's offense and a "
                          "nightly double-double threat."))
    return " ".join(parts)


def defense_doc(ln: Line, lead: dict[str, str], rng: random.Random) -> str:
    s = ln.stats
    assert s is not None
    rpg, bpg, spg = ln.pg("reb"), ln.pg("blk"), ln.pg("stl")
    oreb36 = round(36 * s["oreb"] / s["min"], 1)
    parts = [pick(rng,
                  f"{ln.name} ({ln.team}) grabbed {int(s['reb'])} rebounds ({rpg} per game: "
                  f"{int(s['oreb'])} offensive, {int(s['dreb'])} defensive), with {int(s['stl'])} "
                  f"steals and {int(s['blk'])} blocks.",
                  f"On the glass and on defense, {ln.name} averaged {rpg} rebounds, {spg} steals "
                  f"and {bpg} blocks per game for the {ln.team}.",
                  f"Defensive and rebounding line for {ln.name}: {int(s['reb'])} boards "
                  f"({int(s['oreb'])} offensive), {int(s['stl'])} steals, {int(s['blk'])} blocks "
                  f"in {int(s['gp'])} games.")]
    if bpg >= 2:
        parts.append(pick(rng, f"At {bpg} blocks a game he was an elite rim protector.",
                          f"He protected the rim at an elite level, {bpg} blocks per game."))
    if ln.name == lead["blk"]:
        parts.append("His block total led every player in the dataset.")
    if spg >= 1.8:
        parts.append(f"With {spg} steals per game he was disruptive in the passing lanes.")
    if ln.name == lead["stl"]:
        parts.append("No one in the dataset had more steals.")
    if rpg >= 12:
        parts.append("He was one of the top rebounders in the league.")
    if ln.name == lead["rpg"]:
        parts.append("His rebounds per game were the best in the dataset.")
    if oreb36 >= 5:
        parts.append(f"An offensive rebounding specialist, he collected {oreb36} offensive "
                     "rebounds per 36 minutes.")
    if rpg < 5.5 and s["blk"] >= 80:
        parts.append("For a guard, his shot-blocking is highly unusual.")
    if ln.name in ROOKIES and bpg >= 2:
        parts.append("He did it as a rookie.")
    return " ".join(parts)


def impact_doc(ln: Line, rng: random.Random) -> str:
    s = ln.stats
    assert s is not None
    pm = int(s["plus_minus"])
    parts = [pick(rng,
                  f"{ln.name}'s efficiency: {s['ts_pct']}% true shooting and {s['efg_pct']}% "
                  f"effective field goal percentage for the {ln.team}.",
                  f"Measured by true shooting, {ln.name} ({ln.abbr}) scored at a {s['ts_pct']}% "
                  f"clip; his effective field goal percentage was {s['efg_pct']}%.",
                  f"Efficiency profile of {ln.name}: TS% {s['ts_pct']}, eFG% {s['efg_pct']}.")]
    if s["ts_pct"] >= 63 and s["fga"] >= 1000:
        parts.append("That is exceptional efficiency on a heavy shot diet.")
    elif s["ts_pct"] >= 68:
        parts.append("The efficiency comes from a shot diet of dunks, lobs and putbacks.")
    elif s["ts_pct"] < 55:
        parts.append("His efficiency was below league average.")
    parts.append(f"His team went {int(s['w'])}-{int(s['l'])} in his games and he finished with "
                 f"a plus-minus of {pm:+d}; his Player Impact Estimate (PIE) was {s['pie']}.")
    if s["pie"] >= 19:
        parts.append("A PIE near 20 is MVP territory.")
    if pm <= -400:
        parts.append(pick(rng, "The plus-minus reflects a losing team as much as his own play.",
                          "Few players had a worse plus-minus, a sign of a team that lost often."))
    elif pm >= 550:
        parts.append("Only a handful of players posted a better plus-minus.")
    return " ".join(parts)


def team_doc(abbr: str, name: str, roster: list[Line], rng: random.Random) -> str:
    w, losses = TEAM_RECORDS[abbr]
    played = [ln for ln in roster if ln.stats]
    status = (
        "a title contender" if w >= 55 else "a playoff team" if w >= 46 else
        "a team on the playoff bubble" if w >= 36 else "a lottery team"
    )
    parts = [pick(rng, f"The {name} ({abbr}) finished the 2023-24 regular season {w}-{losses}, "
                       f"{status}.",
                  f"{name}: {w} wins and {losses} losses in 2023-24, {status}.")]
    if played:
        top = max(played, key=lambda ln: ln.stats["pts"])  # type: ignore[index]
        listed = ", ".join(f"{ln.name} ({ln.pg('pts')} ppg)" for ln in played)
        parts.append(f"Players from this team in the dataset: {listed}.")
        parts.append(f"The leading scorer among them was {top.name} with "
                     f"{int(top.stats['pts'])} points.")  # type: ignore[index]
    for ln in roster:
        if not ln.stats:
            parts.append(f"{ln.name} is on the roster but {ABSENCES.get(ln.name, 'did not play')}.")
    if abbr in PLAY_IN:
        parts.append(f"In the play-in tournament the team {PLAY_IN[abbr]}.")
    if w >= 55:
        parts.append("They were among the best teams in the league.")
    if abbr == "IND":
        parts.append("Indiana played at the fastest pace in the league and led it in scoring.")
    if abbr == "OKC":
        parts.append("One of the youngest rosters ever to earn the top seed in the West.")
    if abbr == "MEM":
        parts.append("Injuries and a suspension sidelined most of the core for most of the season.")
    return " ".join(parts)


def build() -> tuple[list[dict[str, object]], list[dict[str, str]], list[tuple[str, str, int]]]:
    """Return corpus records, queries and qrels."""
    lines = load_lines()
    lead = leaders(lines)
    corpus: list[dict[str, object]] = []

    def add(doc_id: str, title: str, text: str) -> None:
        corpus.append({"_id": doc_id, "title": title, "text": text})

    for ln in lines:
        base = slug(ln.name)
        if not ln.stats:
            add(f"{base}-availability", f"{ln.name} - availability 2023-24",
                f"{ln.name} of the {ln.team}, {ln.age}, "
                f"{ABSENCES.get(ln.name, 'did not play')}. He has no statistics for the season.")
            continue
        for facet, title, make in (
            ("scoring", "scoring", lambda r, ln=ln: scoring_doc(ln, lead, r)),
            ("playmaking", "playmaking", lambda r, ln=ln: playmaking_doc(ln, lead, r)),
            ("defense", "defense and rebounding", lambda r, ln=ln: defense_doc(ln, lead, r)),
            ("impact", "efficiency and impact", lambda r, ln=ln: impact_doc(ln, r)),
        ):
            doc_id = f"{base}-{facet}"
            add(doc_id, f"{ln.name} - {title} 2023-24", make(random.Random(f"{SEED}:{doc_id}")))
    teams: dict[str, list[Line]] = {}
    for ln in lines:
        teams.setdefault(ln.abbr, []).append(ln)
    names = {ln.abbr: ln.team for ln in lines}
    for abbr in sorted(TEAM_RECORDS):
        doc_id = f"team-{abbr.lower()}"
        add(doc_id, f"{names[abbr]} - 2023-24 team summary",
            team_doc(abbr, names[abbr], teams.get(abbr, []), random.Random(f"{SEED}:{doc_id}")))
    for doc_id, (title, text) in CONCEPTS.items():
        add(doc_id, title, text)

    ids = {str(d["_id"]) for d in corpus}
    if len(ids) != len(corpus):
        raise SystemExit("duplicate document ids")
    queries = [{"_id": qid, "text": text} for qid, text, _ in QUERIES]
    qrels = []
    for qid, _, judged in QUERIES:
        for doc_id, grade in judged.items():
            if doc_id not in ids:
                raise SystemExit(f"{qid}: judged document {doc_id!r} does not exist")
            qrels.append((qid, doc_id, grade))
    return corpus, queries, qrels


def write(out: Path = OUT) -> None:
    """Write corpus.jsonl, queries.jsonl and qrels/test.tsv under ``out``."""
    corpus, queries, qrels = build()
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8", newline="\n") as fh:
        fh.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in corpus)
    with (out / "queries.jsonl").open("w", encoding="utf-8", newline="\n") as fh:
        fh.writelines(json.dumps(q, ensure_ascii=False) + "\n" for q in queries)
    with (out / "qrels" / "test.tsv").open("w", encoding="utf-8", newline="\n") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        fh.writelines(f"{q}\t{d}\t{g}\n" for q, d, g in qrels)
    print(f"{len(corpus)} documents, {len(queries)} queries, {len(qrels)} judgments -> {out}")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
