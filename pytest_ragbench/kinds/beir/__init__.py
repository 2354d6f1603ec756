"""The ``beir`` kind: judged queries of BEIR folders, scored like trec_eval."""
