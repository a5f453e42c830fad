/**
 * {@link Resource}: the usual primary of a plugin, a custom resource with a typed spec.
 * @module
 */

/** An owner reference (`metadata.ownerReferences[]`). */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** The metadata every object carries (`metav1.ObjectMeta`), as far as plugins read it. */
export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
}

/** Any Kubernetes object, as plugins read dependents and cached objects. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  [field: string]: unknown;
}

/**
 * A custom resource with a typed spec and status: the shape of most primaries. The types are a
 * promise about the JSON, not a check of it: give the reconciler a `decode` to validate.
 *
 * @example
 * ```ts
 * interface Spec { name: string }
 * interface Status { message?: string }
 * type Greeting = Resource<Spec, Status>;
 * ```
 */
export interface Resource<Spec = Record<string, unknown>, Status = Record<string, unknown>> {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec: Spec;
  status?: Status;
}
