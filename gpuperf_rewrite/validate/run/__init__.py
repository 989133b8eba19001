"""Running the user's script under the runtime shim: one run, its scratch mirror, its launcher, its lifetime."""
