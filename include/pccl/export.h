/* Symbol visibility for libpccl. Everything is hidden unless marked PCCL_API. */
#ifndef PCCL_EXPORT_H_
#define PCCL_EXPORT_H_

#if defined(PCCL_BUILDING_LIBRARY)
#if defined(__cplusplus)
#define PCCL_API [[gnu::visibility("default")]]
#else
#define PCCL_API __attribute__((visibility("default")))
#endif
#else
#define PCCL_API
#endif

#endif /* PCCL_EXPORT_H_ */
