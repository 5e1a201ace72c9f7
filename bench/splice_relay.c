// Minimal zero-copy TCP relay (splice through a pipe per direction), one
// thread per direction: the ceiling for any userspace tunnel on this box.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

struct pair { int from, to; };

static void *pump(void *arg) {
  struct pair *p = arg;
  int pipefd[2];
  if (pipe(pipefd) < 0) return NULL;
  fcntl(pipefd[0], F_SETPIPE_SZ, 1 << 20);
  for (;;) {
    ssize_t n = splice(p->from, NULL, pipefd[1], NULL, 1 << 20, SPLICE_F_MOVE);
    if (n <= 0) break;
    while (n > 0) {
      ssize_t m = splice(pipefd[0], NULL, p->to, NULL, n, SPLICE_F_MOVE);
      if (m <= 0) { n = -1; break; }
      n -= m;
    }
    if (n < 0) break;
  }
  shutdown(p->to, SHUT_WR);
  return NULL;
}

int main(int argc, char **argv) {
  int target = atoi(argv[1]);
  int l = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  bind(l, (struct sockaddr *)&a, sizeof a);
  listen(l, 16);
  socklen_t len = sizeof a;
  getsockname(l, (struct sockaddr *)&a, &len);
  printf("%d\n", ntohs(a.sin_port));
  fflush(stdout);
  for (;;) {
    int c = accept(l, NULL, NULL);
    if (c < 0) continue;
    int u = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in t = { .sin_family = AF_INET, .sin_port = htons(target),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(u, (struct sockaddr *)&t, sizeof t) < 0) { close(c); close(u); continue; }
    struct pair *up = malloc(sizeof *up), *down = malloc(sizeof *down);
    up->from = c; up->to = u; down->from = u; down->to = c;
    pthread_t a1, a2;
    pthread_create(&a1, NULL, pump, up);
    pthread_create(&a2, NULL, pump, down);
    pthread_detach(a1);
    pthread_detach(a2);
  }
}
