/* A host program in C: it owns MPI, trains an MLP through capi/tandem.h on its own
 * communicator and its own arrays (each rank its part), and checks the results against
 * references: the ranks end with identical, trained weights; the metric is the logged one; a
 * checkpoint loads back bit for bit; bad input gives TANDEM_CONFIG_ERROR with a message naming
 * it; MPI and the communicator are still the host's afterwards. Prints "capi: passed" on rank 0
 * and exits 0 when everything holds on every rank. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi/tandem.h"

#define FEATURES 784 /* the registered mlp's input: 28 x 28 */
#define PER_RANK 24

static int g_rank = 0;
static int g_bad = 0;

static void check(int holds, const char* what) {
  printf("[rank %d] %s: %s\n", g_rank, holds ? "ok" : "FAILED", what);
  if (!holds) g_bad = 1;
}

static void check_call(int status, const char* call) {
  char line[1024];
  snprintf(line, sizeof line, "%s returned %d %s", call, status, tandem_last_error());
  check(status == TANDEM_OK, line);
}

/* An expected error: the code, and fragments of the message. */
static void check_error(int status, int expected, const char* fragment_a, const char* fragment_b, const char* what) {
  const char* text = tandem_last_error();
  char line[2048];
  snprintf(line, sizeof line, "%s -> %d: %s", what, status, text);
  check(status == expected && strstr(text, fragment_a) != NULL && strstr(text, fragment_b) != NULL, line);
}

static float* parameters(const tandem_model* model, int64_t* count) {
  float* values;
  check_call(tandem_model_num_parameters(model, count), "tandem_model_num_parameters");
  values = (float*)malloc(sizeof(float) * (size_t)*count);
  check_call(tandem_model_copy_parameters(model, values, *count), "tandem_model_copy_parameters");
  return values;
}

int main(int argc, char** argv) {
  int provided = 0, size = 1, i, j, finalized = 1, worst = 0;
  MPI_Comm comm;
  float* x;
  int64_t y[PER_RANK];
  int64_t count = 0, loaded_count = 0;
  float *before, *after, *lo, *hi, *loaded, *small = NULL;
  double val_loss = NAN, unused = 0;
  char dir[256] = "", flags[1024], path[512];
  tandem_model *model = NULL, *reloaded = NULL, *none = NULL;
  tandem_trainer *trainer = NULL, *refused = NULL;
  tandem_data_options data = {4, 8, 1, 7};
  unsigned state;

  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_dup(MPI_COMM_WORLD, &comm); /* the host's own communicator */

  /* This rank's arrays: pseudo-random pixels, the label from the first pixels. */
  x = (float*)malloc(sizeof(float) * PER_RANK * FEATURES);
  state = 12345u + 977u * (unsigned)g_rank;
  for (i = 0; i < PER_RANK; ++i) {
    for (j = 0; j < FEATURES; ++j) {
      state = state * 1103515245u + 12345u;
      x[i * FEATURES + j] = (float)((state >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    y[i] = x[i * FEATURES] + x[i * FEATURES + 1] > 0 ? 1 : 0;
  }

  if (g_rank == 0) {
    strcpy(dir, "/tmp/tandem_capi_XXXXXX");
    if (!mkdtemp(dir)) dir[0] = '\0';
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, comm);

  check_call(tandem_model_create("mlp", "--model.hidden=[16] --optimizer=Adam --optimizer.lr=0.01 --seed_everything=3",
                                 &model),
             "tandem_model_create(mlp)");
  snprintf(flags, sizeof flags,
           "--trainer.accelerator=cpu --trainer.strategy=ddp --trainer.max_epochs=2 --trainer.num_sanity_val_steps=0 "
           "--trainer.enable_progress_bar=false --trainer.enable_model_summary=false "
           "--trainer.enable_checkpointing=false --trainer.default_root_dir=%s",
           dir);
  check_call(tandem_trainer_create((int64_t)MPI_Comm_c2f(comm), flags, &trainer), "tandem_trainer_create");
  if (model == NULL || trainer == NULL) {
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  before = parameters(model, &count);
  check_call(tandem_fit(trainer, model, x, PER_RANK, FEATURES, y, &data), "tandem_fit");
  after = parameters(model, &count);

  /* Identical across the ranks (min == max), and moved by training. */
  lo = (float*)malloc(sizeof(float) * (size_t)count);
  hi = (float*)malloc(sizeof(float) * (size_t)count);
  MPI_Allreduce(after, lo, (int)count, MPI_FLOAT, MPI_MIN, comm);
  MPI_Allreduce(after, hi, (int)count, MPI_FLOAT, MPI_MAX, comm);
  check(memcmp(lo, after, sizeof(float) * (size_t)count) == 0 && memcmp(hi, after, sizeof(float) * (size_t)count) == 0,
        "the ranks hold identical weights after tandem_fit");
  check(memcmp(before, after, sizeof(float) * (size_t)count) != 0, "tandem_fit changed the weights");

  check_call(tandem_metric(trainer, "val_loss", &val_loss), "tandem_metric(val_loss)");
  check(isfinite(val_loss) && val_loss > 0, "val_loss is a positive number");

  /* Checkpoint round trip: a model with other weights loads the trained ones exactly. */
  snprintf(path, sizeof path, "%s/capi.safetensors", dir);
  check_call(tandem_save_checkpoint(trainer, path), "tandem_save_checkpoint");
  check_call(tandem_model_create("mlp", "--model.hidden=[16] --seed_everything=99", &reloaded), "tandem_model_create(other seed)");
  check_call(tandem_load_checkpoint(reloaded, path), "tandem_load_checkpoint");
  loaded = parameters(reloaded, &loaded_count);
  check(loaded_count == count && memcmp(loaded, after, sizeof(float) * (size_t)count) == 0,
        "the loaded checkpoint holds the trained weights");

  /* Bad input: typed errors that name what was given and what is allowed. */
  check_error(tandem_model_create("nosuchmodel", NULL, &none), TANDEM_CONFIG_ERROR, "nosuchmodel", "mlp",
              "an unknown model");
  check(none == NULL, "no model is returned on error");
  check_error(tandem_trainer_create((int64_t)MPI_Comm_c2f(comm), "--model.hidden=[3]", &refused), TANDEM_CONFIG_ERROR,
              "--model.hidden=[3]", "--trainer.*", "a model flag given to the trainer");
  check_error(tandem_fit(trainer, model, NULL, PER_RANK, FEATURES, y, &data), TANDEM_CONFIG_ERROR, "inputs", "NULL",
              "tandem_fit without inputs");
  /* Features the model does not take: bad input, found before training changes anything. */
  free(before), free(after);
  before = parameters(reloaded, &count);
  check_error(tandem_fit(trainer, reloaded, x, PER_RANK, FEATURES - 1, y, &data), TANDEM_CONFIG_ERROR,
              "num_features=", "built for", "features that disagree with the model");
  after = parameters(reloaded, &count);
  check(memcmp(before, after, sizeof(float) * (size_t)count) == 0, "a refused tandem_fit left the weights as they were");
  check_error(tandem_metric(trainer, "no_such_metric", &unused), TANDEM_CONFIG_ERROR, "no_such_metric", "val_loss",
              "an unknown metric");
  small = (float*)malloc(sizeof(float));
  check_error(tandem_model_copy_parameters(model, small, 1), TANDEM_CONFIG_ERROR, "capacity 1", "parameter values",
              "a buffer too small for the parameters");
  free(small);

  check_call(tandem_trainer_destroy(trainer), "tandem_trainer_destroy");
  check_call(tandem_model_destroy(model), "tandem_model_destroy");
  check_call(tandem_model_destroy(reloaded), "tandem_model_destroy");
  MPI_Finalized(&finalized);
  check(!finalized, "MPI is still initialized (the host's)");
  check(MPI_Barrier(comm) == MPI_SUCCESS, "the host's communicator works after the trainer is gone");

  MPI_Comm_free(&comm);
  if (g_rank == 0 && dir[0]) {
    snprintf(flags, sizeof flags, "rm -rf '%s'", dir);
    if (system(flags) != 0) printf("[rank 0] could not remove %s\n", dir);
  }
  MPI_Allreduce(&g_bad, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (g_rank == 0) printf("capi: %s\n", worst ? "FAILED" : "passed");
  free(x), free(before), free(after), free(lo), free(hi), free(loaded);
  MPI_Finalize();
  return worst;
}
