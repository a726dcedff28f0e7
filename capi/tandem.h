/* Tandem's C interface, for C and Fortran host programs (an MPI simulation that trains a model
 * on its own data). Compiles as C89/C99 and C++; needs no MPI header.
 *
 *   tandem_model* model;     tandem_model_create("mlp", "--model.hidden=[64] --optimizer.lr=0.01", &model);
 *   tandem_trainer* trainer; tandem_trainer_create(MPI_Comm_c2f(comm), "--trainer.max_epochs=5", &trainer);
 *   tandem_fit(trainer, model, x, n, 784, y, &data_options);   (x: n x 784 floats, y: n int64 labels)
 *   tandem_metric(trainer, "val_loss", &loss);
 *   tandem_save_checkpoint(trainer, "run.safetensors");   tandem_load_checkpoint(model, "run.safetensors");
 *   tandem_trainer_destroy(trainer);  tandem_model_destroy(model);   (before MPI_Finalize)
 *
 * Every call returns TANDEM_OK (0) or an error code and never lets an exception out; after an
 * error, tandem_last_error() says what was given and what is allowed. Flags are the `tandem`
 * program's dotted flags (docs/CLI.md), separated by spaces. The trainer runs on the host's
 * communicator as TrainerOptions::communicator does (docs/COLLECTIVES.md): the host owns MPI,
 * every rank of the communicator makes the same calls in the same order, and each rank passes
 * its own part of the data (no resharding; the same number of batches on every rank). */
#ifndef TANDEM_CAPI_TANDEM_H
#define TANDEM_CAPI_TANDEM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  TANDEM_OK = 0,
  TANDEM_ERROR = 1,        /* a runtime failure: communication, I/O, numerics */
  TANDEM_CONFIG_ERROR = 2  /* bad input: an unknown flag or value, a null argument, sizes that disagree */
};

typedef struct tandem_model tandem_model;
typedef struct tandem_trainer tandem_trainer;

/* The text of this thread's last error; "" when the last call succeeded. Valid until the next call. */
const char* tandem_last_error(void);

/* A registered model (`mlp`, `cnn`, or one a program registered) with its optimizer; `flags`
 * (may be NULL) holds --model.*, --optimizer*, --lr_scheduler* and --seed_everything flags. */
int tandem_model_create(const char* name, const char* flags, tandem_model** out);
int tandem_model_destroy(tandem_model* model);
/* Number of parameter values, and a copy of them in state_dict order (capacity >= that number). */
int tandem_model_num_parameters(const tandem_model* model, int64_t* count);
int tandem_model_copy_parameters(const tandem_model* model, float* out, int64_t capacity);

/* A Trainer on the host's MPI communicator, given as its Fortran handle (MPI_Comm_c2f(comm) in
 * C; the INTEGER communicator in Fortran). `flags` (may be NULL): --trainer.* flags.
 * Collective over the communicator. */
int tandem_trainer_create(int64_t mpi_comm_fortran_handle, const char* flags, tandem_trainer** out);
int tandem_trainer_destroy(tandem_trainer* trainer);

typedef struct tandem_data_options {
  int64_t batch_size; /* >= 1 */
  int64_t val_size;   /* examples of this rank's arrays held out for validation; 0: none */
  int shuffle;        /* nonzero: shuffle the training examples each epoch */
  uint64_t seed;      /* the split and the shuffle */
} tandem_data_options;

/* Trains `model` on this rank's arrays, viewed in place: inputs [num_examples x num_features]
 * float32 row-major, targets [num_examples] class indices. Collective. */
int tandem_fit(tandem_trainer* trainer, tandem_model* model, const float* inputs, int64_t num_examples,
               int64_t num_features, const int64_t* targets, const tandem_data_options* options);
/* A metric the last fit logged (e.g. "val_loss", "train_loss"), averaged over the ranks. */
int tandem_metric(const tandem_trainer* trainer, const char* name, double* value);
/* The fitted model, optimizer and trainer state in one .safetensors file (written by rank 0;
 * collective). */
int tandem_save_checkpoint(tandem_trainer* trainer, const char* path);
/* The model weights of a checkpoint file into `model` (any rank, no communication). */
int tandem_load_checkpoint(tandem_model* model, const char* path);

#ifdef __cplusplus
}
#endif

#endif /* TANDEM_CAPI_TANDEM_H */
