/* Simulated power loss (gem/testing/powerloss.py): an LD_PRELOAD shim that keeps, for every
 * file under GEM_POWERLOSS_WATCH, a copy of its content as of its last successful fsync or
 * fdatasync, and the directory tree's names as of the last sync of anything under it.
 *
 *   $GEM_POWERLOSS_SHADOW/data/<dev>-<ino>   a file's content at its last sync
 *   $GEM_POWERLOSS_SHADOW/names              "<relative path>\t<dev>-<ino>" per file
 *   $GEM_POWERLOSS_SHADOW/dirs/<dev>-<ino>   a directory's own files at its last fsync
 *
 * Copies are written to a temporary name and renamed, so a SIGKILL leaves the previous copy
 * whole. The names follow the ordered-journal model of ext4 and XFS: a sync commits every
 * earlier create, rename and unlink with it. Strict POSIX makes a name durable only by an
 * fsync of its directory: `dirs/` keeps what each directory fsync made durable.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long counter;

static const char *env(const char *name) {
    const char *value = getenv(name);
    return value && *value ? value : NULL;
}

static void copy_content(int fd, const struct stat *st, const char *shadow) {
    char dst[4096], tmp[4200];
    static char buf[1 << 20];
    snprintf(dst, sizeof dst, "%s/data/%lx-%lx", shadow, (unsigned long)st->st_dev,
             (unsigned long)st->st_ino);
    snprintf(tmp, sizeof tmp, "%s.%d.%lu.tmp", dst, (int)getpid(), counter++);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) return;
    off_t off = 0;
    for (;;) {
        ssize_t n = pread(fd, buf, sizeof buf, off);
        if (n <= 0) break;
        if (write(out, buf, (size_t)n) != n) break;
        off += n;
    }
    close(out);
    rename(tmp, dst);
}

static void list_names(FILE *out, const char *root, const char *rel, int depth) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s%s%s", root, *rel ? "/" : "", rel);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[8300], name[4096];
        struct stat st;
        snprintf(name, sizeof name, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        snprintf(path, sizeof path, "%s/%s", root, name);
        if (lstat(path, &st)) continue;
        if (S_ISDIR(st.st_mode) && depth < 3)
            list_names(out, root, name, depth + 1);
        else if (S_ISREG(st.st_mode))
            fprintf(out, "%s\t%lx-%lx\n", name, (unsigned long)st.st_dev, (unsigned long)st.st_ino);
    }
    closedir(d);
}

static void record_names(const char *watch, const char *shadow) {
    char dst[4096], tmp[4200];
    snprintf(dst, sizeof dst, "%s/names", shadow);
    snprintf(tmp, sizeof tmp, "%s.%d.%lu.tmp", dst, (int)getpid(), counter++);
    FILE *out = fopen(tmp, "we");
    if (!out) return;
    list_names(out, watch, "", 0);
    fclose(out);
    rename(tmp, dst);
}

static void record_directory(const char *path, const struct stat *st, const char *shadow) {
    char dst[4096], tmp[4200];
    snprintf(dst, sizeof dst, "%s/dirs/%lx-%lx", shadow, (unsigned long)st->st_dev,
             (unsigned long)st->st_ino);
    snprintf(tmp, sizeof tmp, "%s.%d.%lu.tmp", dst, (int)getpid(), counter++);
    FILE *out = fopen(tmp, "we");
    if (!out) return;
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            char child[8300];
            struct stat cs;
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            if (!lstat(child, &cs) && S_ISREG(cs.st_mode))
                fprintf(out, "%s\t%lx-%lx\n", e->d_name, (unsigned long)cs.st_dev,
                        (unsigned long)cs.st_ino);
        }
        closedir(d);
    }
    fclose(out);
    rename(tmp, dst);
}

static void after_sync(int fd) {
    const char *watch = env("GEM_POWERLOSS_WATCH"), *shadow = env("GEM_POWERLOSS_SHADOW");
    if (!watch || !shadow) return;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return;
    path[n] = 0;
    size_t w = strlen(watch);
    if (strncmp(path, watch, w) || (path[w] && path[w] != '/')) return;
    struct stat st;
    if (fstat(fd, &st)) return;
    pthread_mutex_lock(&lock);
    if (S_ISREG(st.st_mode)) copy_content(fd, &st, shadow);
    if (S_ISDIR(st.st_mode)) record_directory(path, &st, shadow);
    record_names(watch, shadow);
    pthread_mutex_unlock(&lock);
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    int r = real(fd);
    if (r == 0) after_sync(fd);
    return r;
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    int r = real(fd);
    if (r == 0) after_sync(fd);
    return r;
}
