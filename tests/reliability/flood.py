#!/usr/bin/env python3
"""Unauthenticated traffic at a job's listeners (loopback only), for
tests/reliability/flood.sh and fdlimit.sh.

  flood.py --tcp ADDR... --udp ADDR... --connections N --datagrams N [--until-pid PID]
  flood.py --hold N --tcp ADDR... [--until-pid PID]

Flood mode: N tcp connections, spread over the addresses, each of one kind
in turn: connect and close at once; connect and send random bytes; connect
and send a gridwire-looking hello naming a wrong context; connect, say
nothing and leave it to the receiver's handshake timeout (closed by us after
2 s at most, so at most a few hundred are open at once). And N udp datagrams
of random length and content. With --until-pid it goes on until that
process ends instead (the whole job runs under load; the caller checks that
at least N were sent). Hold mode: opens N tcp
connections and keeps them open until the pid ends (the open-file limit
check). Prints one summary line as JSON.
"""
import argparse, json, os, random, socket, sys, time


def addr(s):
    host, port = s.rsplit(":", 1)
    return host.strip("[]"), int(port)


def alive(pid):
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    # A zombie is not alive for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tcp", nargs="*", default=[])
    ap.add_argument("--udp", nargs="*", default=[])
    ap.add_argument("--connections", type=int, default=10000)
    ap.add_argument("--datagrams", type=int, default=10000)
    ap.add_argument("--until-pid", type=int)
    ap.add_argument("--hold", type=int, default=0)
    ap.add_argument("--seed", type=int, default=19)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tcp = [addr(x) for x in a.tcp]
    udp = [addr(x) for x in a.udp]
    t0 = time.time()
    res = {"connections": 0, "refused_or_reset": 0, "datagrams": 0, "held": 0}

    if a.hold:
        held = []
        for i in range(a.hold):
            s = socket.socket()
            s.settimeout(2)
            try:
                s.connect(tcp[i % len(tcp)])
                held.append(s)
            except OSError:
                res["refused_or_reset"] += 1
                s.close()
        res["held"] = len(held)
        while alive(a.until_pid) and time.time() - t0 < 600:
            time.sleep(0.1)
        for s in held:
            s.close()
        res["seconds"] = round(time.time() - t0, 2)
        print(json.dumps(res))
        return

    us = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    lingering = []
    i = 0
    # With --until-pid the flood lasts exactly as long as the job (the counts
    # are then minimums the caller checks); without, it stops at the counts.
    def more(done, want):
        return alive(a.until_pid) if a.until_pid is not None else done < want

    while (more(res["connections"], a.connections) or more(res["datagrams"], a.datagrams)) \
            and time.time() - t0 < 600:
        if tcp and more(res["connections"], a.connections):
            kind = i % 4
            s = socket.socket()
            s.settimeout(0.2)
            try:
                s.connect(tcp[i % len(tcp)])
                if kind == 1:
                    s.send(rng.randbytes(rng.randrange(1, 200)))
                elif kind == 2:
                    # magic, "my" context, a context that is not the listener's, nonce
                    s.send(b"GWT2" + (7).to_bytes(4, "little") + (12345).to_bytes(4, "little")
                           + rng.randbytes(16))
                if kind == 3:
                    lingering.append((time.time(), s))
                else:
                    s.close()
            except OSError as e:
                res["refused_or_reset"] += 1
                k = "err_" + (e.__class__.__name__ if e.errno is None else str(e.errno))
                res[k] = res.get(k, 0) + 1
                s.close()
            res["connections"] += 1
            while lingering and (time.time() - lingering[0][0] > 2 or len(lingering) > 200):
                lingering.pop(0)[1].close()
        if udp and more(res["datagrams"], a.datagrams):
            try:
                us.sendto(rng.randbytes(rng.randrange(0, 1400)), udp[i % len(udp)])
            except OSError:
                pass
            res["datagrams"] += 1
        i += 1
        if not tcp and not udp:
            break
    for _, s in lingering:
        s.close()
    res["seconds"] = round(time.time() - t0, 2)
    print(json.dumps(res))


if __name__ == "__main__":
    sys.exit(main())
