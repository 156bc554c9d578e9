"""dfctl: deploy, watch and compare long multi-GPU training runs on Proxmox/LXC hosts."""

__version__ = "0.1.0"
