#!/usr/bin/python3
"""Small network probes for the namespace tests (no ping/iperf needed), every one bounded in time.

  nettool.py ping ADDR [--count N] [--timeout S]     ICMP echo (raw socket: root); exit 0 when
                                                     every echo was answered; prints the RTTs
  nettool.py recv ADDR PORT [--timeout S]            accept one TCP connection, read until EOF,
                                                     print {"bytes", "seconds", "mbit_per_s"}
  nettool.py send ADDR PORT --mb M [--timeout S]     connect (retrying until the timeout) and
                                                     send M MiB, then close
The receiver's clock starts at its first byte, so connection set-up is not counted.
"""
import argparse
import json
import os
import socket
import struct
import sys
import time


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def ping(a):
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident = os.getpid() & 0xFFFF
    answered = 0
    for seq in range(1, a.count + 1):
        payload = struct.pack("!d", time.perf_counter()) + b"prism-netns" * 4
        header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
        packet = struct.pack("!BBHHH", 8, 0, checksum(header + payload), ident, seq) + payload
        sock.sendto(packet, (a.addr, 0))
        deadline = time.monotonic() + a.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                print(f"seq {seq}: no answer from {a.addr} within {a.timeout} s")
                break
            sock.settimeout(left)
            try:
                data, peer = sock.recvfrom(2048)
            except socket.timeout:
                continue
            ihl = (data[0] & 0x0F) * 4
            kind, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
            if kind == 0 and rid == ident and rseq == seq and peer[0] == a.addr:
                sent = struct.unpack("!d", data[ihl + 8:ihl + 16])[0]
                print(f"seq {seq}: reply from {a.addr} in {(time.perf_counter() - sent) * 1e3:.3f} ms")
                answered += 1
                break
        time.sleep(0.05)
    return 0 if answered == a.count else 1


def recv(a):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((a.addr, a.port))
    srv.listen(1)
    srv.settimeout(a.timeout)
    conn, _ = srv.accept()
    deadline = time.monotonic() + a.timeout
    conn.settimeout(a.timeout)
    total, start = 0, None
    buf = bytearray(1 << 20)
    while time.monotonic() < deadline:
        n = conn.recv_into(buf)
        if n == 0:
            break
        if start is None:
            start = time.perf_counter()
            first = n
        total += n
    end = time.perf_counter()
    conn.close()
    srv.close()
    if start is None:
        print(json.dumps({"bytes": 0}))
        return 1
    # The first read happened at 'start'; count the bytes after it over the time after it.
    seconds = end - start
    rate = (total - first) * 8 / seconds / 1e6 if seconds > 0 else 0.0
    print(json.dumps({"bytes": total, "seconds": round(seconds, 4), "mbit_per_s": round(rate, 1)}))
    return 0


def send(a):
    deadline = time.monotonic() + a.timeout
    while True:
        try:
            sock = socket.create_connection((a.addr, a.port), timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    sock.settimeout(a.timeout)
    chunk = b"\xa5" * (1 << 20)
    for _ in range(a.mb):
        if time.monotonic() > deadline:
            print("send: timed out", file=sys.stderr)
            return 1
        sock.sendall(chunk)
    sock.shutdown(socket.SHUT_WR)
    sock.close()
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("ping")
    q.add_argument("addr")
    q.add_argument("--count", type=int, default=3)
    q.add_argument("--timeout", type=float, default=2.0)
    q = sub.add_parser("recv")
    q.add_argument("addr")
    q.add_argument("port", type=int)
    q.add_argument("--timeout", type=float, default=30.0)
    q = sub.add_parser("send")
    q.add_argument("addr")
    q.add_argument("port", type=int)
    q.add_argument("--mb", type=int, default=200)
    q.add_argument("--timeout", type=float, default=30.0)
    a = p.parse_args()
    return {"ping": ping, "recv": recv, "send": send}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
