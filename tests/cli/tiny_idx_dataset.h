// A Fashion-MNIST-shaped dataset small enough for a test: the four gzipped IDX files with
// random pixels and labels, written with zlib into a directory.
#pragma once
#include <cstdint>
#include <string>

// Writes train-{images-idx3,labels-idx1}-ubyte.gz with n_train examples and t10k-* with n_test.
void write_tiny_fashion_mnist(const std::string& dir, int n_train, int n_test, uint32_t seed = 1);
