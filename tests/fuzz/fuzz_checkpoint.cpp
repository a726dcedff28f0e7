// Fuzz target: checkpoints (engine/trainer/checkpoint.cpp and the Trainer's restore,
// checkpoint_connector.cpp), as `tandem fit --ckpt_path=FILE` and `tandem validate
// --ckpt_path=FILE` read them. Input: the checkpoint file's bytes, resumed by the tiny run of
// tiny_training.h. Allowed outcomes besides success: DataError (a malformed file),
// StateDictError (weights of another model), ConfigError (state written by another optimizer).
// The run writes under fuzz_checkpoint_run/ in the working directory, a relative path so that
// the checkpoints' recorded paths (ModelCheckpoint's state) match the seeds' on every machine;
// the directory is removed after each input.
#include <cstdint>
#include <filesystem>

#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/tiny_training.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tandem::fuzz::ScratchFile file("checkpoint.safetensors");
  const std::string root = "fuzz_checkpoint_run";
  tandem::fuzz::resume_tiny_run(file.write(data, size), root);
  std::filesystem::remove_all(root);
  return 0;
}
