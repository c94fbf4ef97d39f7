/* The fork server's client (forkserver.py) in C, for lit's RUN lines:
 *
 *     forkclient SOCKET TOOL ARGS...
 *
 * does what `python -S forkserver.py SOCKET TOOL ARGS...` does, without
 * starting Python (about 15 ms a call, several hundred calls a run).
 * lit.cfg.py builds it at start-up and uses the Python client where it cannot.
 *
 * The request is one message of NUL-terminated fields: the number of
 * arguments, TOOL and ARGS, the working directory, then the environment's
 * NAME=VALUE entries; standard input, output and error go with it
 * (SCM_RIGHTS). The reply is the exit status in decimal, or nothing when the
 * child died of a signal. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

extern char **environ;

struct buffer {
  char *data;
  size_t len, cap;
};

static void put(struct buffer *b, const char *field) {
  size_t n = strlen(field) + 1;
  if (b->len + n > b->cap) {
    b->cap = 2 * (b->len + n);
    b->data = realloc(b->data, b->cap);
    if (b->data == NULL) {
      perror("forkclient");
      exit(1);
    }
  }
  memcpy(b->data + b->len, field, n);
  b->len += n;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: forkclient SOCKET TOOL [ARGS...]\n");
    return 2;
  }
  struct buffer request = {NULL, 0, 0};
  char count[32];
  snprintf(count, sizeof count, "%d", argc - 2);
  put(&request, count);
  for (int i = 2; i < argc; i++) put(&request, argv[i]);
  char *cwd = getcwd(NULL, 0);
  if (cwd == NULL) {
    perror("forkclient: getcwd");
    return 1;
  }
  put(&request, cwd);
  for (char **entry = environ; *entry != NULL; entry++) put(&request, *entry);

  struct sockaddr_un address = {.sun_family = AF_UNIX};
  if (strlen(argv[1]) >= sizeof address.sun_path) {
    fprintf(stderr, "forkclient: socket path too long: %s\n", argv[1]);
    return 1;
  }
  strcpy(address.sun_path, argv[1]);
  int server = socket(AF_UNIX, SOCK_STREAM, 0);
  if (server < 0 || connect(server, (struct sockaddr *)&address, sizeof address) != 0) {
    perror(argv[1]);
    return 1;
  }

  int fds[3] = {0, 1, 2};
  union {
    struct cmsghdr header;
    char bytes[CMSG_SPACE(sizeof fds)];
  } control;
  memset(&control, 0, sizeof control);
  struct iovec data = {request.data, request.len};
  struct msghdr message = {0};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control.bytes;
  message.msg_controllen = sizeof control.bytes;
  struct cmsghdr *rights = CMSG_FIRSTHDR(&message);
  rights->cmsg_level = SOL_SOCKET;
  rights->cmsg_type = SCM_RIGHTS;
  rights->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(rights), fds, sizeof fds);
  ssize_t sent;
  do sent = sendmsg(server, &message, 0);
  while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    perror("forkclient: sendmsg");
    return 1;
  }
  for (size_t done = (size_t)sent; done < request.len;) {
    ssize_t n = write(server, request.data + done, request.len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      perror("forkclient: write");
      return 1;
    }
    done += (size_t)n;
  }
  shutdown(server, SHUT_WR);

  char reply[64];
  size_t got = 0;
  while (got < sizeof reply - 1) {
    ssize_t n = read(server, reply + got, sizeof reply - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  if (got == 0) { /* the child died of a signal */
    fprintf(stderr, "%s: killed\n", argv[2]);
    return 1;
  }
  reply[got] = '\0';
  return atoi(reply);
}
