import gym
import numpy as np
import torch

from agent import SacAgent


def main():
    env = gym.make("Pendulum-v1")
    device = torch.device("cuda")
    agent = SacAgent(env.observation_space.shape[0], env.action_space.shape[0], device)
    buffer = []
    obs, done = env.reset(), False
    for step in range(100000):
        if step < 1000:
            action = env.action_space.sample()
        else:
            action = agent.sample_action(obs)
        next_obs, reward, done, _ = env.step(action)
        buffer.append((obs, action, reward))
        obs = env.reset() if done else next_obs
        if step >= 1000:
            idx = np.random.randint(0, len(buffer), 256)
            o = torch.as_tensor(np.stack([buffer[i][0] for i in idx]), dtype=torch.float32, device=device)
            a = torch.as_tensor(np.stack([buffer[i][1] for i in idx]), dtype=torch.float32, device=device)
            r = torch.as_tensor(np.array([buffer[i][2] for i in idx]), dtype=torch.float32, device=device)
            loss = agent.update(o, a, r)
            if step % 1000 == 0:
                print(step, loss)
        if step % 10000 == 0:
            eval_obs, eval_done, total = env.reset(), False, 0.0
            while not eval_done:
                eval_obs, r, eval_done, _ = env.step(agent.select_action(eval_obs))
                total += r


if __name__ == "__main__":
    main()
