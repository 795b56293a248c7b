"""Small hand-written entity word lists (four concepts, 18 words each: enough for the entity
probes' five folds), shared by tests that need entity neurons without the packaged lists."""

ENTITY_WORDS = {
    "chess": ["checkmate", "rook", "bishop", "pawn", "castling", "en passant", "grandmaster", "chessboard", "stalemate",
              "knight fork", "Sicilian Defense", "queen's gambit", "Magnus Carlsen", "endgame", "opening theory",
              "check", "Garry Kasparov", "chess clock"],
    "cooking": ["saute", "simmer", "recipe", "frying pan", "oven", "whisk", "braise", "marinade", "chef", "kitchen knife",
                "baking soda", "roast chicken", "spatula", "stir-fry", "dough", "casserole", "seasoning", "sous vide"],
    "astronomy": ["telescope", "galaxy", "nebula", "supernova", "planet", "comet", "black hole", "constellation",
                  "observatory", "light-year", "Milky Way", "asteroid", "exoplanet", "quasar", "red giant",
                  "solar eclipse", "Hubble", "meteor shower"],
    "football": ["touchdown", "quarterback", "goalpost", "penalty kick", "offside", "midfielder", "goalkeeper",
                 "World Cup", "free kick", "Super Bowl", "linebacker", "referee", "striker", "header", "yellow card",
                 "field goal", "corner kick", "Premier League"],
}
