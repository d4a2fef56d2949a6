/* LD_PRELOAD shim for test_timeouts.py: a link that is always moving and never done.
 *
 * The first connection the process accepts (the group's data connection from rank 1; the
 * test keeps the store elsewhere, so nothing else is accepted before it) hands its bytes
 * over one per recv(), SLOW_LINK_DELAY_MS apart, and answers "nothing yet" (EAGAIN) once
 * between two bytes. So the receiver always has a byte coming and never waits a whole
 * poll for one: a deadline checked only when nothing moved is never checked at all, which
 * is what a fast sender facing a slower receiver does to it on a real network. Every other
 * socket, and this one's sends, are left alone. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

static int slow_fd = -1;
static int byte_due = 1;

static int remember(int fd) {
  if (fd >= 0 && slow_fd < 0) slow_fd = fd;
  return fd;
}

int accept(int fd, struct sockaddr *addr, socklen_t *len) {
  int (*real)(int, struct sockaddr *, socklen_t *) = dlsym(RTLD_NEXT, "accept");
  return remember(real(fd, addr, len));
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
  int (*real)(int, struct sockaddr *, socklen_t *, int) = dlsym(RTLD_NEXT, "accept4");
  return remember(real(fd, addr, len, flags));
}

ssize_t recv(int fd, void *buf, size_t len, int flags) {
  ssize_t (*real)(int, void *, size_t, int) = dlsym(RTLD_NEXT, "recv");
  if (fd != slow_fd || len == 0) return real(fd, buf, len, flags);
  if (!byte_due) {
    byte_due = 1;
    errno = EAGAIN;
    return -1;
  }
  const char *env = getenv("SLOW_LINK_DELAY_MS");
  long ms = env ? atol(env) : 10;
  struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&pause, NULL);
  ssize_t n = real(fd, buf, 1, flags);
  if (n > 0) byte_due = 0;
  return n;
}
