class BaseAgent:
    def feed(self, batch):
        pass

    def learn(self):
        pass
