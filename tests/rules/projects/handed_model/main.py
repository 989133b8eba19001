import torch

from agents import ActorCriticUpdate, Policy


def main(num_updates=10_000, obs_dim=64, n_actions=6):
    torch.backends.cuda.matmul.allow_tf32 = True
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    policy = Policy(obs_dim, n_actions).to(device)
    agent = ActorCriticUpdate(policy, lr=3e-4)
    for _ in range(num_updates):
        obs = torch.randn(512, obs_dim, device=device)
        actions = torch.randint(0, n_actions, (512,), device=device)
        returns = torch.randn(512, device=device)
        agent.update(obs, actions, returns)


if __name__ == "__main__":
    main()
