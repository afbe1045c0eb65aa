/* run_example.h - the device-free tests that run an example program whole (its main renamed and
   included into the test): one run in a child, its output to /dev/null, under a time limit.
   Include after harness.h (fake_env.h) and the example. */
#ifndef RUN_EXAMPLE_H
#define RUN_EXAMPLE_H
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs an example's main with args (NULL-terminated, args[0] the program) in a child whose
   output goes to /dev/null, for at most limit_s seconds: its exit status, or -1 if it had to be
   killed (it still waited) or died of a signal. */
static int run_example(int (*example_main)(int, char **), const char *const *args, unsigned limit_s) {
    int status, argc = 0;
    pid_t pid;
    while (args[argc]) argc++;
    fflush(NULL);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        char *argv[32];
        int i;
        if (null >= 0) {
            dup2(null, 1);
            dup2(null, 2);
        }
        for (i = 0; i < argc && i < 31; i++) argv[i] = (char *)args[i];
        argv[i] = NULL;
        optind = 1;
        alarm(limit_s);
        exit(example_main(argc, argv));
    }
    CHECK(waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
#endif
