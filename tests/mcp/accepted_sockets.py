"""Prints, as JSON, TCP_NODELAY of every connection process PID accepted on its port PORT.

Usage: accepted_sockets.py PID PORT

Linux's pidfd_getfd(2) copies each of the process's socket descriptors into this one, where
getsockopt reads the option the server set (nothing outside the process can see it otherwise).
Waits until at least one accepted connection exists (the server may not have accepted yet),
failing after 20 s.
"""

import ctypes
import json
import os
import socket
import sys
import time

SYS_PIDFD_OPEN = 434
SYS_PIDFD_GETFD = 438


def accepted(pid: int, port: int) -> list[bool]:
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = libc.syscall(SYS_PIDFD_OPEN, pid, 0)
    if pidfd < 0:
        raise OSError(ctypes.get_errno(), f"pidfd_open({pid})")
    found = []
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    continue
            except OSError:
                continue
            copy = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(fd), 0)
            if copy < 0:
                raise OSError(ctypes.get_errno(), f"pidfd_getfd({pid}, {fd})")
            sock = socket.socket(fileno=copy)
            try:
                if sock.family not in (socket.AF_INET, socket.AF_INET6):
                    continue
                if sock.type != socket.SOCK_STREAM or sock.getsockname()[1] != port:
                    continue
                try:
                    sock.getpeername()
                except OSError:
                    continue  # the listener itself
                found.append(bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)))
            finally:
                sock.close()
    finally:
        os.close(pidfd)
    return found


def main() -> None:
    pid, port = int(sys.argv[1]), int(sys.argv[2])
    deadline = time.monotonic() + 20
    while True:
        found = accepted(pid, port)
        if found or time.monotonic() > deadline:
            print(json.dumps(found))
            return
        time.sleep(0.05)


if __name__ == "__main__":
    main()
