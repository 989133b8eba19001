"""Process plumbing: how a run starts (``entry``, ``forkserver``, ``parentwatch``), what it may
write (``guard``), where its wall time goes (``phases``), and the run itself (``session``), which
wires every other concern together. The top layer of the shim."""
