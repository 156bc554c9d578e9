"""Placeholder: the SSH + LXC test rig's pytest fixtures land here (issue 2)."""
