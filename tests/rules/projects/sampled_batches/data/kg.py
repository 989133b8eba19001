from data.base import SamplerBase


class KGSampler(SamplerBase):
    def describe(self):
        return len(self.user_dict)
