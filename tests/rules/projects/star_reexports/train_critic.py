import argparse

from utils import *
from models.critic import Critic

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=1000)
parser.add_argument("--obs-dim", type=int, default=17)
args = parser.parse_args()

device = torch.device("cuda", 0)
critic = Critic(args.obs_dim).to(device)
optimizer = torch.optim.Adam(critic.parameters(), lr=3e-4)

def collect(n):
    return np.random.randn(n, args.obs_dim), np.random.randn(n, 1)

for it in range(args.iters):
    buffer_obs, buffer_ret = collect(64)
    obs = torch.from_numpy(buffer_obs).float().to(device)
    ret = torch.from_numpy(buffer_ret).float().to(device)
    for _ in range(5):
        order = LongTensor(np.random.permutation(obs.shape[0])).to(device)
        loss = (critic(obs[order]) - ret[order]).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.cuda.empty_cache()
