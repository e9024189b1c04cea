//! Which native frames are an allocator's own, never "the line": a site is
//! named by the innermost frame past all of them (`sites`). Every
//! allocation goes through some of these, so naming one says nothing of
//! the program; naming it with a share of the growth says something false.
//!
//! A frame is an allocator's by its library (the C and C++ runtimes,
//! jemalloc, tcmalloc, mimalloc, this project's preloaded library) or by
//! its function, for allocators linked into a program or a library that
//! also holds the program's code: the interpreter's memory interface and
//! object allocation (`PyObject_Malloc`, `PyMem_*`, pymalloc's arenas, the
//! list and dict growth helpers), C++'s `operator new` and the containers'
//! growth, Rust's global allocator, PyTorch's CPU allocator and the
//! tensor-allocating entry points above it, numpy's data allocator.

/// Libraries all of whose frames are an allocator's or a runtime's (by the
/// start of the file's name).
const LIBRARIES: [&str; 10] = [
    "libflatline_preload",
    "libc.so",
    "libc-",
    "libstdc++",
    "libgcc_s",
    "ld-linux",
    "libjemalloc",
    "libtcmalloc",
    "libmimalloc",
    "libmemkind",
];

/// Whole function names (C symbols) that allocate and nothing else.
const FUNCTIONS: [&str; 58] = [
    // The C runtime, where it is linked in (a static program).
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "free",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "mmap",
    "mmap64",
    "sysmalloc",
    "_int_malloc",
    "_int_realloc",
    "_int_memalign",
    "tcache_init",
    "_mid_memalign",
    // CPython's memory interface and object allocation.
    "PyObject_Malloc",
    "PyObject_Calloc",
    "PyObject_Realloc",
    "_PyObject_Malloc",
    "_PyObject_Calloc",
    "_PyObject_Realloc",
    "PyMem_Malloc",
    "PyMem_Calloc",
    "PyMem_Realloc",
    "PyMem_RawMalloc",
    "PyMem_RawCalloc",
    "PyMem_RawRealloc",
    "_PyObject_New",
    "_PyObject_NewVar",
    "PyType_GenericAlloc",
    "_PyType_AllocNoTrack",
    "PyType_GenericNew",
    "_PyObject_GC_New",
    "_PyObject_GC_NewVar",
    "_PyObject_GC_Resize",
    "_PyObject_GC_Link",
    "PyObject_GC_Malloc",
    "_PyObject_GC_Malloc",
    // numpy's data allocator (its default handler and cache).
    "default_malloc",
    "default_calloc",
    "default_realloc",
    "npy_alloc_cache",
    "npy_alloc_cache_zero",
    "npy_alloc_cache_dim",
    "_npy_alloc_cache",
    "PyArray_NewFromDescr",
    "PyArray_NewFromDescr_int",
    "PyArray_NewFromDescrAndBase",
    "PyArray_NewLikeArray",
    "PyArray_NewLikeArrayWithShape",
    // Rust's global allocator.
    "__rust_alloc",
    "__rust_alloc_zeroed",
    "__rust_realloc",
    "__rdl_alloc",
    "__rdl_realloc",
];

/// Static helpers of CPython's that grow its containers and pools: named
/// only in the interpreter's own files (another program may have a
/// `list_resize` of its own).
const CPYTHON_HELPERS: [&str; 14] = [
    "pymalloc_alloc",
    "pymalloc_realloc",
    "allocate_from_new_pool",
    "new_arena",
    "gc_alloc",
    "list_resize",
    "list_preallocate_exact",
    "app1",
    "_PyList_AppendTakeRefListResize",
    "dictresize",
    "new_keys_object",
    "insertion_resize",
    "resize_compact",
    "_PyObject_ArenaMmap",
];

/// CPython's source files, as its DWARF names them, where those helpers
/// live.
const CPYTHON_FILES: [&str; 7] = [
    "obmalloc.c",
    "listobject.c",
    "dictobject.c",
    "gcmodule.c",
    "gc.c",
    "unicodeobject.c",
    "object.c",
];

/// Function-name prefixes that are an allocator's.
const PREFIXES: [&str; 26] = [
    "__libc_",
    "_PyMem_",
    "_PyObject_Arena",
    "PyDataMem_",
    "operator new",
    "operator delete",
    "__gnu_cxx::new_allocator<",
    "__gnu_cxx::__new_allocator<",
    "std::__new_allocator<",
    "std::allocator<",
    "std::allocator_traits<",
    "std::__allocated_ptr<",
    "alloc::alloc::",
    "alloc::raw_vec::",
    "<alloc::alloc::Global",
    "c10::alloc_cpu",
    "c10::free_cpu",
    "c10::StorageImpl::",
    "c10::make_intrusive<c10::StorageImpl",
    "at::detail::empty_",
    "je_",
    "_rjem_",
    "tc_",
    "tcmalloc::",
    "mi_",
    "_mi_",
];

/// Substrings of (demangled) C++ names that are an allocator's: PyTorch's
/// CPU allocators and the standard containers' growth.
const CONTAINS: [&str; 12] = [
    "CPUAllocator",
    "c10::(anonymous namespace)::DefaultCPUAllocator",
    "::_M_allocate",
    "::_M_realloc_insert",
    "::_M_realloc_append",
    "::_M_default_append",
    "::_M_create",
    "::_M_mutate",
    "::_M_construct<",
    "alloc::raw_vec::finish_grow",
    "RawVec<",
    "RawVecInner<",
];

/// Whether a frame in library `lib` (the mapped file's name), whose DWARF
/// says it is in source `file`, in `function` (demangled), is an
/// allocator's own.
pub fn is_allocator(lib: &str, file: &str, function: &str) -> bool {
    if LIBRARIES.iter().any(|l| lib.starts_with(l)) {
        return true;
    }
    // A symbol's version (`malloc@GLIBC_2.2.5`), a clone's suffix
    // (`dictresize.constprop.0`, `.isra`, `.part`, `.cold`) or a C++
    // signature is not its name.
    let name = function
        .split(['@', ' ', '.'])
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or(function);
    if FUNCTIONS.contains(&name) {
        return true;
    }
    // CPython's allocating entry points, whatever the version calls them
    // (3.13's `_PyObject_MallocWithType`, inlined from
    // `pycore_object_alloc.h`).
    let python_api = name.starts_with("_Py") || name.starts_with("Py");
    if python_api
        && ["Malloc", "Calloc", "Realloc"]
            .iter()
            .any(|m| name.contains(m))
    {
        return true;
    }
    let source = file.rsplit('/').next().unwrap_or(file);
    let interpreter = CPYTHON_FILES.contains(&source)
        || lib.starts_with("libpython")
        || lib.starts_with("python");
    if interpreter && CPYTHON_HELPERS.contains(&name) {
        return true;
    }
    if PREFIXES.iter().any(|p| function.starts_with(p)) {
        return true;
    }
    // `at::native::empty_cpu`, `at::_ops::empty_memory_format::call`,
    // `at::empty_like`: the tensor a PyTorch operator returns, allocated.
    if function.starts_with("at::") && tensor_allocation(function) {
        return true;
    }
    CONTAINS.iter().any(|c| function.contains(c))
}

/// `at::…empty…` (a function of ATen's whose last name begins with
/// `empty`), or the dispatcher's glue around one.
fn tensor_allocation(function: &str) -> bool {
    let head = function.split('(').next().unwrap_or(function);
    let head = head.split('<').next().unwrap_or(head);
    head.split("::").any(|part| part.starts_with("empty"))
}

#[cfg(test)]
mod tests {
    use super::is_allocator;

    #[test]
    fn the_interpreter_s_allocator_is_never_the_line() {
        for (lib, file, f) in [
            (
                "libpython3.12.so.1.0",
                "Objects/obmalloc.c",
                "_PyObject_Malloc",
            ),
            (
                "libpython3.10.so.1.0",
                "Objects/obmalloc.c",
                "_PyObject_ArenaMmap",
            ),
            (
                "libpython3.12.so.1.0",
                "Objects/obmalloc.c",
                "_PyMem_ArenaAlloc",
            ),
            (
                "libpython3.13.so.1.0",
                "Objects/obmalloc.c",
                "PyMem_RawMalloc",
            ),
            (
                "libpython3.13.so.1.0",
                "Objects/obmalloc.c",
                "pymalloc_alloc",
            ),
            ("libpython3.12.so.1.0", "Objects/obmalloc.c", "new_arena"),
            (
                "libpython3.12.so.1.0",
                "Objects/obmalloc.c",
                "allocate_from_new_pool",
            ),
            ("python3.11", "Objects/listobject.c", "list_resize"),
            ("python3.11", "Objects/listobject.c", "app1"),
            ("libpython3.11.so.1.0", "Objects/dictobject.c", "dictresize"),
            (
                "libpython3.11.so.1.0",
                "Objects/dictobject.c",
                "insertion_resize",
            ),
            (
                "libpython3.11.so.1.0",
                "Objects/dictobject.c",
                "new_keys_object.constprop.0",
            ),
            (
                "libpython3.12.so.1.0",
                "Modules/gcmodule.c",
                "_PyObject_GC_NewVar",
            ),
            ("libpython3.13.so.1.0", "Python/gc.c", "gc_alloc"),
            (
                "libpython3.12.so.1.0",
                "Objects/typeobject.c",
                "PyType_GenericAlloc",
            ),
            ("libpython3.12.so.1.0", "Objects/object.c", "_PyObject_New"),
            (
                "libpython3.13.so.1.0",
                "./Include/internal/pycore_object_alloc.h",
                "_PyObject_MallocWithType",
            ),
            (
                "libpython3.14.so.1.0",
                "Objects/obmalloc.c",
                "_PyObject_MallocSomeNewWay",
            ),
        ] {
            assert!(is_allocator(lib, file, f), "{f} in {lib}");
        }
        // The interpreter's other frames are not an allocator's (a native
        // site where its frames cannot be read is one of these).
        for (lib, file, f) in [
            (
                "libpython3.14.so.1.0",
                "Objects/bytearrayobject.c",
                "bytearray___init__",
            ),
            (
                "libpython3.14.so.1.0",
                "Python/ceval.c",
                "_PyEval_EvalFrameDefault",
            ),
            (
                "libpython3.14.so.1.0",
                "Objects/listobject.c",
                "list_append",
            ),
        ] {
            assert!(!is_allocator(lib, file, f), "{f} in {lib}");
        }
        // A helper's name in a program of its own is the program's.
        assert!(!is_allocator("mytool", "src/list.c", "list_resize"));
        assert!(!is_allocator("mytool", "src/pool.c", "new_arena"));
    }

    #[test]
    fn the_c_and_cxx_runtimes_are_never_the_line() {
        for (lib, f) in [
            ("libc.so.6", "malloc"),
            ("libc-2.31.so", "anything"),
            ("libstdc++.so.6.0.30", "operator new(unsigned long)"),
            ("libgcc_s.so.1", "_Unwind_Backtrace"),
            ("ld-linux-x86-64.so.2", "_dl_allocate_tls"),
            ("libflatline_preload.so", "malloc"),
            // A static program carries its own copy.
            ("sites_leak", "malloc"),
            ("sites_leak", "_int_malloc"),
            ("sites_leak", "__libc_malloc"),
            ("sites_leak", "malloc@GLIBC_2.2.5"),
            ("train", "operator new(unsigned long)"),
            ("train", "operator new[](unsigned long)"),
            (
                "train",
                "std::vector<float, std::allocator<float> >::_M_realloc_insert<float const&>",
            ),
            (
                "train",
                "std::vector<int, std::allocator<int> >::_M_default_append(unsigned long)",
            ),
            (
                "train",
                "__gnu_cxx::new_allocator<char>::allocate(unsigned long, void const*)",
            ),
            (
                "train",
                "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_create(unsigned long&, unsigned long)",
            ),
            ("worker", "alloc::raw_vec::finish_grow"),
            ("worker", "__rust_alloc"),
            ("worker", "<alloc::raw_vec::RawVec<T,A>>::grow_one"),
        ] {
            assert!(is_allocator(lib, "", f), "{f} in {lib}");
        }
        for (lib, f) in [
            ("sites_leak", "leak_here"),
            ("train", "Model::forward(Batch const&)"),
            (
                "train",
                "std::vector<float, std::allocator<float> >::push_back(float const&)",
            ),
            ("worker", "worker::cache::Cache::insert"),
        ] {
            // push_back is the program's call: the growth under it is not.
            assert!(!is_allocator(lib, "", f), "{f} in {lib}");
        }
    }

    #[test]
    fn pytorch_s_cpu_allocator_is_never_the_line() {
        for f in [
            "c10::alloc_cpu(unsigned long)",
            "c10::DefaultCPUAllocator::allocate(unsigned long)",
            "c10::(anonymous namespace)::DefaultCPUAllocator::allocate(unsigned long)",
            "c10::StorageImpl::StorageImpl(c10::StorageImpl::use_byte_size_t, c10::SymInt const&, c10::Allocator*, bool)",
            "c10::make_intrusive<c10::StorageImpl, c10::detail::intrusive_target_default_null_type<c10::StorageImpl>, c10::StorageImpl::use_byte_size_t, unsigned long&, c10::Allocator*&, bool>(c10::StorageImpl::use_byte_size_t&&, unsigned long&, c10::Allocator*&, bool&&)",
            "at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)",
            "at::detail::empty_cpu(c10::ArrayRef<long>, c10::ScalarType, bool, std::optional<c10::MemoryFormat>)",
            "at::native::empty_cpu(c10::ArrayRef<long>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)",
            "at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)",
            "at::native::empty_like(at::Tensor const&, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)",
        ] {
            assert!(is_allocator("libc10.so", "", f), "{f}");
            assert!(is_allocator("libtorch_cpu.so", "", f), "{f}");
        }
        for f in [
            "at::native::clone(at::Tensor const&, std::optional<c10::MemoryFormat>)",
            "at::native::addmm_out_cpu(at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&, at::Tensor&)",
            "torch::autograd::THPVariable_clone(_object*, _object*, _object*)",
        ] {
            assert!(!is_allocator("libtorch_cpu.so", "", f), "{f}");
        }
    }

    #[test]
    fn jemalloc_tcmalloc_mimalloc_and_numpy_are_never_the_line() {
        for (lib, f) in [
            ("libjemalloc.so.2", "je_malloc_default"),
            ("train", "je_malloc_default"),
            ("train", "_rjem_je_malloc_default"),
            ("libtcmalloc_minimal.so.4", "tc_malloc"),
            (
                "train",
                "tcmalloc::ThreadCache::FetchFromCentralCache(unsigned int, int, void* (*)(unsigned long))",
            ),
            ("train", "tc_newarray"),
            ("libmimalloc.so.2", "mi_malloc"),
            ("train", "mi_heap_malloc_zero"),
            ("train", "_mi_malloc_generic"),
            (
                "_multiarray_umath.cpython-312-x86_64-linux-gnu.so",
                "default_malloc",
            ),
            (
                "_multiarray_umath.cpython-312-x86_64-linux-gnu.so",
                "PyDataMem_UserNEW",
            ),
            (
                "_multiarray_umath.cpython-312-x86_64-linux-gnu.so",
                "npy_alloc_cache",
            ),
            (
                "_multiarray_umath.cpython-312-x86_64-linux-gnu.so",
                "PyArray_NewFromDescr_int",
            ),
        ] {
            assert!(is_allocator(lib, "", f), "{f} in {lib}");
        }
        for (lib, f) in [
            (
                "_multiarray_umath.cpython-312-x86_64-linux-gnu.so",
                "PyArray_Concatenate",
            ),
            (
                "_multiarray_umath.cpython-312-x86_64-linux-gnu.so",
                "array_array",
            ),
            // Names that only begin like an allocator's.
            ("train", "minimize"),
            ("train", "tcp_send"),
            ("train", "jet_reconstruct"),
        ] {
            assert!(!is_allocator(lib, "", f), "{f} in {lib}");
        }
    }
}
