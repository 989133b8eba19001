def regress_step(critic, optimizer, obs, targets):
    loss = (critic(obs) - targets).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss
