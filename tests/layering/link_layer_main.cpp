// The whole of one layer linked with only the layers below it (tests/layering/CMakeLists.txt):
// building this proves the layer needs nothing from above, running it that its static
// initializers do not either.
int main() { return 0; }
