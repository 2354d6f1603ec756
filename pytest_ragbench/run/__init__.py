"""The run: what happens between pytest's start and the report, on controller and workers.

- :mod:`.session` — the controller's run: the state its parts share, the order it ends in;
  its parts :mod:`.checks`, :mod:`.opening`, :mod:`.controller` (xdist workers),
  :mod:`.recorder`, :mod:`.ending`, :mod:`.reporting`, one job each.
- :mod:`.journal`, :mod:`.interruption`, :mod:`.resume`, :mod:`.locking` — every finished
  record kept the moment it finishes; SIGTERM as Ctrl-C; continuing a run.
- :mod:`.prefetch`, :mod:`.schedule` — model work started ahead of the items.
- :mod:`.worker_groups`, :mod:`.threads`, :mod:`.plots_ahead` — pytest-xdist: kinds that
  load one slow library share a worker, each worker its share of the CPUs, idle workers
  draw plots.
- :mod:`.progress`, :mod:`.garbage` — progress bars; the session's objects kept out of
  the garbage collector's scans.
"""
