class Learner:
    """Holds the networks and their optimizers; not a module itself."""

    def __init__(self, cfg):
        self.cfg = cfg

    def learn(self, batch):
        raise NotImplementedError
