import argparse

import torch

from nets import *

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=50)
opt = parser.parse_args()

cuda = torch.cuda.is_available()
gen, critic = Generator(), Critic()
if cuda:
    gen, critic = gen.cuda(), critic.cuda()
opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999), foreach=True)
opt_d = torch.optim.Adam(critic.parameters(), lr=2e-4, betas=(0.5, 0.999), foreach=True)
real_batches = [torch.randn(4, 3, 128, 128) for _ in range(8)]

for epoch in range(opt.epochs):
    for real in real_batches:
        real = real.cuda() if cuda else real
        fake = gen(torch.randn_like(real))
        opt_d.zero_grad()
        d_loss = critic(fake.detach()).mean() - critic(real).mean()
        d_loss.backward()
        opt_d.step()
        opt_g.zero_grad()
        g_loss = -critic(fake).mean()
        g_loss.backward()
        opt_g.step()
