/* TCP floor: raw loopback ping-pong with TCP_NODELAY between two processes.
 * Usage: tcp_pingpong SIZE ITERS [spin]. Prints the one-way latency in
 * microseconds. With "spin" both sides busy-poll with MSG_DONTWAIT instead of
 * sleeping in read(): the fair floor for a runtime that polls while waiting
 * (on a VM, waking a sleeping reader can cost more than the transfer).
 * PIN=A,B pins the accepting process (which also times) to CPU A and the
 * connecting one to CPU B: which CPU accepts can change the figure by a
 * third on a small VM, so a comparison pins both sides alike. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int spin;

static void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set)) { perror("sched_setaffinity"); exit(1); }
}

static void full(int fd, char *buf, size_t n, int rd) {
    size_t off = 0;
    while (off < n) {
        ssize_t k = rd ? recv(fd, buf + off, n - off, spin ? MSG_DONTWAIT : 0)
                       : send(fd, buf + off, n - off, MSG_NOSIGNAL);
        if (k < 0 && spin && rd && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (k <= 0) { perror(rd ? "recv" : "send"); exit(1); }
        off += (size_t)k;
    }
}

int main(int argc, char **argv) {
    size_t size = argc > 1 ? (size_t)atol(argv[1]) : 8;
    long iters = argc > 2 ? atol(argv[2]) : 20000;
    spin = argc > 3 && strcmp(argv[3], "spin") == 0;
    if (size == 0) size = 1; /* a 0-byte TCP message does not exist; send one byte */
    int cpu_accept = -1, cpu_connect = -1;
    const char *p = getenv("PIN");
    if (p && sscanf(p, "%d,%d", &cpu_accept, &cpu_connect) != 2) { fprintf(stderr, "PIN=A,B expected\n"); return 1; }
    pin(cpu_accept);
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0 };
    socklen_t al = sizeof a;
    if (bind(ls, (void *)&a, sizeof a) || listen(ls, 1) || getsockname(ls, (void *)&a, &al)) { perror("listen"); return 1; }
    char *buf = calloc(1, size);
    int one = 1;
    pid_t pid = fork();
    if (pid == 0) {
        pin(cpu_connect);
        int c = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(c, (void *)&a, sizeof a)) { perror("connect"); _exit(1); }
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        for (long i = 0; i < iters; i++) { full(c, buf, size, 1); full(c, buf, size, 0); }
        _exit(0);
    }
    int s = accept(ls, NULL, NULL);
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    long warm = iters / 10;
    double t0 = 0;
    for (long i = 0; i < iters; i++) {
        if (i == warm) t0 = now();
        full(s, buf, size, 0);
        full(s, buf, size, 1);
    }
    double t = now() - t0;
    waitpid(pid, NULL, 0);
    printf("%.2f\n", t / (2.0 * (iters - warm)) * 1e6);
    return 0;
}
