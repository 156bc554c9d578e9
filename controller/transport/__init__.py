"""Transports: local subprocess, SSH (paramiko), and `pct exec` containers on top of SSH."""

from controller.transport.base import Result, Transport, join_argv

__all__ = ["Result", "Transport", "join_argv"]
