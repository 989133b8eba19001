"""Loop and sync rules (GP1xx): work on every training step that waits for the GPU or copies to
it: host syncs, printing tensors, blocking copies, host tensors moved each step."""
