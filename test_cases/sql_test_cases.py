"""More SQL cases for the bundled NBA 2023-24 database, as a Python module.

pytest-ragbench parses this file and never executes it: only literals are allowed here.
Cases without an ``id`` get a stable id generated from their content. Every
``ground_truth_data`` value was obtained by running ``expected_sql`` on the database.
"""

SQL_TEST_CASES = [
    {
        "id": "warriors_avg_ppg",
        "kind": "sql",
        "category": "aggregation",
        "question": (
            "What was the average points per game of the Golden State Warriors players in the "
            "database?"
        ),
        "expected_sql": (
            "SELECT ROUND(AVG(1.0 * ps.pts / ps.gp), 1) AS avg_ppg "
            "FROM players p "
            "JOIN player_stats ps ON p.id = ps.player_id "
            "WHERE p.team_abbr = 'GSW'"
        ),
        "ground_truth_data": {"avg_ppg": 15.5},
        "ground_truth_answer": (
            "Averaged over the Warriors players in the database, the scoring average is 15.5 "
            "points per game."
        ),
    },
    {
        "kind": "sql",
        "category": "aggregation",
        "question": "How many blocks did the Celtics players record in total?",
        "expected_sql": (
            "SELECT SUM(ps.blk) AS total_blk "
            "FROM players p "
            "JOIN player_stats ps ON p.id = ps.player_id "
            "WHERE p.team_abbr = 'BOS'"
        ),
        "ground_truth_data": {"total_blk": 395},
        "ground_truth_answer": "The Celtics players combined for 395 blocks.",
    },
    {
        "id": "veterans_60_games",
        "kind": "sql",
        "category": "filter",
        "question": "Which players aged 33 or older played at least 60 games?",
        "expected_sql": (
            "SELECT p.name, p.age, ps.gp "
            "FROM players p "
            "JOIN player_stats ps ON p.id = ps.player_id "
            "WHERE p.age >= 33 AND ps.gp >= 60"
        ),
        "ground_truth_data": [
            {"name": "Kevin Durant", "age": 35, "gp": 75},
            {"name": "Stephen Curry", "age": 35, "gp": 74},
            {"name": "LeBron James", "age": 39, "gp": 71},
            {"name": "Damian Lillard", "age": 33, "gp": 73},
            {"name": "Paul George", "age": 33, "gp": 74},
            {"name": "Jimmy Butler", "age": 34, "gp": 60},
            {"name": "Jrue Holiday", "age": 33, "gp": 69},
            {"name": "Al Horford", "age": 37, "gp": 65},
            {"name": "Klay Thompson", "age": 33, "gp": 77},
            {"name": "DeMar DeRozan", "age": 34, "gp": 79},
        ],
        "ground_truth_answer": (
            "Veterans (33+) with at least 60 games: Kevin Durant (35, 75 games); Stephen Curry "
            "(35, 74 games); LeBron James (39, 71 games); Damian Lillard (33, 73 games); Paul "
            "George (33, 74 games); Jimmy Butler (34, 60 games); Jrue Holiday (33, 69 games); "
            "Al Horford (37, 65 games); Klay Thompson (33, 77 games); DeMar DeRozan (34, 79 "
            "games)."
        ),
    },
    {
        "kind": "sql",
        "category": "filter",
        "question": "Which Dallas Mavericks players shot over 70% from the field?",
        "expected_sql": (
            "SELECT p.name, ps.fg_pct "
            "FROM players p "
            "JOIN player_stats ps ON p.id = ps.player_id "
            "WHERE p.team_abbr = 'DAL' AND ps.fg_pct > 70"
        ),
        "ground_truth_data": [
            {"name": "Daniel Gafford", "fg_pct": 72.8},
            {"name": "Dereck Lively II", "fg_pct": 74.6},
        ],
        "ground_truth_answer": (
            "Mavericks over 70% from the field: Daniel Gafford (72.8%) and Dereck Lively II "
            "(74.6%)."
        ),
    },
    {
        "id": "top2_free_throws_made",
        "kind": "sql",
        "category": "top_n",
        "question": "Which two players made the most free throws?",
        "expected_sql": (
            "SELECT p.name, ps.ftm "
            "FROM players p "
            "JOIN player_stats ps ON p.id = ps.player_id "
            "ORDER BY ps.ftm DESC "
            "LIMIT 2"
        ),
        "ground_truth_data": [
            {"name": "Shai Gilgeous-Alexander", "ftm": 570},
            {"name": "DeMar DeRozan", "ftm": 545},
        ],
        "ground_truth_answer": (
            "Most free throws made: Shai Gilgeous-Alexander (570), DeMar DeRozan (545)."
        ),
        "order_matters": True,
    },
    {
        "kind": "sql",
        "category": "top_n",
        "question": "Which player committed the most turnovers?",
        "expected_sql": (
            "SELECT p.name, ps.tov "
            "FROM players p "
            "JOIN player_stats ps ON p.id = ps.player_id "
            "ORDER BY ps.tov DESC "
            "LIMIT 1"
        ),
        "ground_truth_data": {"name": "Luka Doncic", "tov": 280},
        "ground_truth_answer": "Luka Doncic committed the most turnovers (280).",
    },
    {
        "id": "jokic_vs_embiid",
        "kind": "sql",
        "category": "join",
        "question": (
            "Compare Nikola Jokic and Joel Embiid: games played, points per game and PIE."
        ),
        "expected_sql": (
            "SELECT p.name, ps.gp, ROUND(1.0 * ps.pts / ps.gp, 1) AS ppg, ps.pie "
            "FROM players p "
            "JOIN player_stats ps ON p.id = ps.player_id "
            "WHERE p.name IN ('Nikola Jokic', 'Joel Embiid')"
        ),
        "ground_truth_data": [
            {"name": "Joel Embiid", "gp": 39, "ppg": 34.6, "pie": 21.2},
            {"name": "Nikola Jokic", "gp": 79, "ppg": 26.4, "pie": 20.6},
        ],
        "ground_truth_answer": (
            "Joel Embiid: 39 games, 34.6 points per game, PIE 21.2; Nikola Jokic: 79 games, "
            "26.4 points per game, PIE 20.6."
        ),
    },
    {
        "kind": "sql",
        "category": "join",
        "question": (
            "Which team does the player with the highest true shooting percentage play for?"
        ),
        "expected_sql": (
            "SELECT p.name, p.team, ps.ts_pct "
            "FROM players p "
            "JOIN player_stats ps ON p.id = ps.player_id "
            "ORDER BY ps.ts_pct DESC "
            "LIMIT 1"
        ),
        "ground_truth_data": {
            "name": "Dereck Lively II",
            "team": "Dallas Mavericks",
            "ts_pct": 74.0,
        },
        "ground_truth_answer": (
            "Dereck Lively II of the Dallas Mavericks has the highest true shooting percentage "
            "(74.0%)."
        ),
    },
    {
        "id": "thunder_blocks_rank",
        "kind": "sql",
        "category": "ranking",
        "question": "Rank the Oklahoma City Thunder players by total blocks.",
        "expected_sql": (
            "SELECT p.name, ps.blk, RANK() OVER (ORDER BY ps.blk DESC) AS blk_rank "
            "FROM players p "
            "JOIN player_stats ps ON p.id = ps.player_id "
            "WHERE p.team_abbr = 'OKC' "
            "ORDER BY blk_rank"
        ),
        "ground_truth_data": [
            {"name": "Chet Holmgren", "blk": 189, "blk_rank": 1},
            {"name": "Shai Gilgeous-Alexander", "blk": 68, "blk_rank": 2},
            {"name": "Jalen Williams", "blk": 43, "blk_rank": 3},
        ],
        "ground_truth_answer": (
            "Thunder by blocks: 1. Chet Holmgren (189), 2. Shai Gilgeous-Alexander (68), 3. "
            "Jalen Williams (43)."
        ),
        "order_matters": True,
    },
    {
        "kind": "sql",
        "category": "ranking",
        "question": (
            "Rank the top 3 players by true shooting percentage among those with at least 1000 "
            "field goal attempts."
        ),
        "expected_sql": (
            "SELECT p.name, ps.ts_pct, RANK() OVER (ORDER BY ps.ts_pct DESC) AS ts_rank "
            "FROM players p "
            "JOIN player_stats ps ON p.id = ps.player_id "
            "WHERE ps.fga >= 1000 "
            "ORDER BY ts_rank "
            "LIMIT 3"
        ),
        "ground_truth_data": [
            {"name": "Domantas Sabonis", "ts_pct": 65.3, "ts_rank": 1},
            {"name": "Nikola Jokic", "ts_pct": 65.0, "ts_rank": 2},
            {"name": "Giannis Antetokounmpo", "ts_pct": 64.9, "ts_rank": 3},
        ],
        "ground_truth_answer": (
            "Best true shooting on 1000+ attempts: 1. Domantas Sabonis (65.3%), 2. Nikola Jokic"
            " (65.0%), 3. Giannis Antetokounmpo (64.9%)."
        ),
        "order_matters": True,
    },
    {
        "id": "no_threes_70_games",
        "kind": "sql",
        "category": "null_handling",
        "question": (
            "Which players played at least 70 games without attempting a single three-pointer?"
        ),
        "expected_sql": (
            "SELECT p.name, ps.gp "
            "FROM players p "
            "JOIN player_stats ps ON p.id = ps.player_id "
            "WHERE ps.three_pct IS NULL AND ps.gp >= 70"
        ),
        "ground_truth_data": [
            {"name": "Rudy Gobert", "gp": 76},
            {"name": "Jarrett Allen", "gp": 77},
            {"name": "Clint Capela", "gp": 73},
            {"name": "Daniel Gafford", "gp": 74},
        ],
        "ground_truth_answer": (
            "Players with 70+ games and no three-point attempts (three_pct NULL): Rudy Gobert "
            "(76 games); Jarrett Allen (77 games); Clint Capela (73 games); Daniel Gafford (74 "
            "games)."
        ),
    },
    {
        "kind": "sql",
        "category": "null_handling",
        "question": (
            "How many stats rows have a recorded three-point percentage, compared with all "
            "stats rows?"
        ),
        "expected_sql": (
            "SELECT COUNT(three_pct) AS with_three_pct, COUNT(*) AS all_rows FROM player_stats"
        ),
        "ground_truth_data": {"with_three_pct": 65, "all_rows": 73},
        "ground_truth_answer": (
            "65 of the 73 stats rows have a three-point percentage; the others are NULL."
        ),
    },
    {
        "id": "chicago_games_played_coalesce",
        "kind": "sql",
        "category": "null_handling",
        "question": (
            "List the Chicago Bulls players with their games played, counting a player with no "
            "stats as 0 games."
        ),
        "expected_sql": (
            "SELECT p.name, COALESCE(ps.gp, 0) AS gp "
            "FROM players p "
            "LEFT JOIN player_stats ps ON p.id = ps.player_id "
            "WHERE p.team_abbr = 'CHI'"
        ),
        "ground_truth_data": [
            {"name": "DeMar DeRozan", "gp": 79},
            {"name": "Zach LaVine", "gp": 25},
            {"name": "Lonzo Ball", "gp": 0},
        ],
        "ground_truth_answer": (
            "Bulls games played: DeMar DeRozan 79; Zach LaVine 25; Lonzo Ball 0."
        ),
    },
    {
        "id": "avg_fg_pct_by_age_group",
        "kind": "sql",
        "category": "aggregation",
        "question": (
            "What is the average field goal percentage of players under 25 compared with "
            "players 30 and older?"
        ),
        "expected_sql": (
            "SELECT CASE WHEN p.age < 25 THEN 'under_25' ELSE '30_plus' END AS age_group, "
            "       ROUND(AVG(ps.fg_pct), 1) AS avg_fg_pct "
            "FROM players p "
            "JOIN player_stats ps ON p.id = ps.player_id "
            "WHERE p.age < 25 OR p.age >= 30 "
            "GROUP BY age_group"
        ),
        "ground_truth_data": [
            {"age_group": "30_plus", "avg_fg_pct": 49.5},
            {"age_group": "under_25", "avg_fg_pct": 50.3},
        ],
        "ground_truth_answer": "Average field goal percentage: 30 plus: 49.5%; under 25: 50.3%.",
        "float_places": 1,
    },
]
