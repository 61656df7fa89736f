/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A process may end with exit() while its other threads are still inside fi_* calls: a signal
 * handler that calls exit() does that (libinfinipath, which Debian's libfabric loads through its
 * psm provider, installs one for SIGTERM), and so does a main thread that returns while workers
 * run. exit() runs libfabric's destructor, which closes the external providers' modules. The
 * process must then end with the status it asked for, not fault in a provider's unmapped code.
 *
 * Each round forks a child that opens two endpoints, starts threads sending, receiving and
 * reading completions between them, and calls exit() (or raises SIGTERM, whose handler calls
 * exit()) while they run. The child must end with status 0 within its bound. EXIT_ROUNDS sets
 * the number of rounds (default 24, half of them through the signal).
 */
#include "xt.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { worker_count = 4 };

static struct xt_ep a, b;
static fi_addr_t a_to_b, b_to_a;

static void *worker(void *arg)
{
	const int index = (int)(intptr_t)arg;
	struct xt_ep *from = index % 2 ? &a : &b, *to = index % 2 ? &b : &a;
	const fi_addr_t dest = index % 2 ? a_to_b : b_to_a;
	char out[64] = {0}, in[4096];
	struct fi_cq_tagged_entry e[8];
	for (;;) {
		(void)fi_tinject(from->ep, out, index < 2 ? sizeof out : 8, dest, 7);
		(void)fi_trecv(to->ep, in, sizeof in, NULL, FI_ADDR_UNSPEC, 7, 0, NULL);
		(void)fi_cq_read(from->txcq, e, 8);
		(void)fi_cq_read(to->rxcq, e, 8);
	}
	return NULL;
}

static void exit_now(int sig)
{
	(void)sig;
	exit(0);
}

static int child(int through_signal)
{
	struct fi_info *h = xt_hints();
	h->domain_attr->threading = FI_THREAD_SAFE;
	xt_open(&a, h, 0);
	xt_open(&b, h, 0);
	fi_freeinfo(h);
	a_to_b = xt_insert(&a, b.name);
	b_to_a = xt_insert(&b, a.name);
	if (through_signal) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = exit_now;
		sigaction(SIGTERM, &sa, NULL);
	}
	pthread_t t[worker_count];
	for (int i = 0; i < worker_count; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) != 0)
			return 3;
	usleep(50000 + (unsigned)(getpid() % 50) * 1000);
	if (through_signal)
		raise(SIGTERM); /* the handler runs on this thread, between two calls or inside one */
	exit(0);
}

int main(void)
{
	xt_init(170);
	const size_t rounds = xt_env_size("EXIT_ROUNDS", 24);
	size_t faults = 0;
	for (size_t r = 0; r < rounds; r++) {
		const int through_signal = (int)(r % 2);
		fflush(NULL);
		pid_t pid = fork();
		XT_CHECK(pid >= 0, "fork");
		if (pid == 0) {
			alarm(20); /* a child that hangs in exit() ends by SIGALRM: reported below */
			_exit(child(through_signal));
		}
		int status = 0;
		XT_CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
		if (WIFSIGNALED(status)) {
			fprintf(stderr, "round %zu (%s): child ended by signal %d (%s)\n", r,
			        through_signal ? "SIGTERM handler calls exit" : "exit from main",
			        WTERMSIG(status), strsignal(WTERMSIG(status)));
			faults++;
		} else {
			XT_CHECK(WEXITSTATUS(status) == 0, "round %zu: child exit status %d", r,
			         WEXITSTATUS(status));
		}
	}
	XT_CHECK(faults == 0, "%zu of %zu children did not end with their own exit status", faults,
	         rounds);
	xt_pass("exit() while threads are inside fi_* calls ends the process with its status");
	return 0;
}
