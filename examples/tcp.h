/* tcp.h - the few lines of TCP the examples use to swap endpoints and descriptors before RDMA
   takes over: accept one connection, connect, and read or write an exact number of bytes.
   Not part of safeverbs: two processes that already talk (as these examples do) can swap the
   32-byte endpoints over any stream; for the ranks of a job the library has sfv_exchange_all and
   sfv_node_connect. */
#ifndef EXAMPLES_TCP_H
#define EXAMPLES_TCP_H

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Listens on `port`, accepts one connection and stops listening. -1 on failure, errno EINVAL for
   a port outside 1 .. 65535: cast to 16 bits it named another (65536 is 0, which binds a port
   the kernel picks, where no peer ever connects: the accept waited for good). */
static int tcp_accept(int port) {
    struct sockaddr_in a;
    int one = 1, fd, conn = -1;
    if (port < 1 || port > 65535) {
        errno = EINVAL;
        return -1;
    }
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0) conn = accept(fd, NULL, NULL);
    close(fd);
    return conn;
}

/* Connects to host:port. -1 on failure (errno EINVAL for a port outside 1 .. 65535). */
static int tcp_connect(const char *host, int port) {
    struct addrinfo hints, *res, *ai;
    char service[16];
    int fd = -1;
    if (port < 1 || port > 65535) {
        errno = EINVAL;
        return -1;
    }
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    snprintf(service, sizeof service, "%d", port);
    if (getaddrinfo(host, service, &hints, &res) != 0) return -1;
    for (ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

/* Writes or reads exactly n bytes; false on error or end of stream. */
static bool write_all(int fd, const void *p, size_t n) {
    for (const char *c = p; n > 0;) {
        ssize_t k = write(fd, c, n);
        if (k <= 0) return false;
        c += k, n -= (size_t)k;
    }
    return true;
}

static bool read_all(int fd, void *p, size_t n) {
    for (char *c = p; n > 0;) {
        ssize_t k = read(fd, c, n);
        if (k <= 0) return false;
        c += k, n -= (size_t)k;
    }
    return true;
}

#endif
